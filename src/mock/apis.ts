/**
 * The mock's answers to the APIs besides completions, as vLLM's OpenAI server gives them: embeddings
 * (`/v1/embeddings`), reranking and scoring (`/v1/rerank`, `/v1/score`: a cross-encoder's ratings, here
 * from the embeddings), classifying and pooling (`/classify`, `/pooling`), tokenizing (`/tokenize`, `/detokenize`) and a minimal Responses API
 * (`/v1/responses`), and speech to text (`/v1/audio/transcriptions`, `/translations`). Each is answered at once, without the engine (no queueing or batching is modelled
 * for them). Everything is deterministic: the same request gets the same answer. Pure.
 */
import { tokenize, VOCAB_SIZE } from '../engine/index.js';
import { promptBodyOf, renderPrompt } from '../openai/prompt.js';
import { audioFormProblem, bodyProblem, embeddingInputProblem, formBoolean, type ApiKind, type AudioKind, type FormValue } from '../openai/validate.js';
import { vllmProblem, type Refusal, type ServedModel } from './admission.js';
import type { ResponseStore } from './response-store.js';
import { naturalLength, requestKey, TOKEN_TEXT, tokenWord } from './text.js';

/** The length of the mock's embedding vectors (a request's `dimensions` may ask for fewer). */
export const EMBEDDING_DIM = 128;

export type ApiAnswer =
  | { status: 200; body: string; contentType?: string; /** a background answer: its id, and the tokens it takes to generate */ background?: { id: string; tokens: number } }
  | { status: 400 | 404; refusal: Refusal };

function refuse(message: string, param: string | null = null, status: 400 | 404 = 400): ApiAnswer {
  return { status, refusal: { status, message, param } };
}

/** The body parsed and checked as vLLM would before answering a `kind` request. */
function parse(text: string, kind: ApiKind, served: ServedModel): { body: Record<string, unknown>; model: string } | ApiAnswer {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    return refuse(`JSON decode error: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return refuse('Input should be a valid dictionary or object to extract fields from');
  const b = body as Record<string, unknown>;
  const model = b.model === undefined || b.model === null ? served.model : b.model;
  if (typeof model !== 'string') return refuse('model: Input should be a valid string', 'model');
  if (model !== served.model && !served.loras.includes(model)) return refuse(`The model \`${model}\` does not exist.`, 'model', 404);
  const problem = bodyProblem(kind, b);
  if (problem !== null) {
    const r = vllmProblem(problem, b);
    return { status: r.status, refusal: r };
  }
  return { body: b, model };
}

function isAnswer(v: { body: Record<string, unknown>; model: string } | ApiAnswer): v is ApiAnswer {
  return 'status' in v;
}

/** The usage of an answer that reads a prompt and generates nothing (vLLM's UsageInfo for pooling models). */
function promptUsage(promptTokens: number) {
  return { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0, prompt_tokens_details: null };
}

/** The token lists of an embeddings `input` (checked already: a string, strings, ids or lists of ids). */
function inputTokens(input: unknown): ArrayLike<number>[] {
  if (typeof input === 'string') return [tokenize(input)];
  const list = input as unknown[];
  if (typeof list[0] === 'string') return list.map((s) => tokenize(s as string));
  if (typeof list[0] === 'number') return [list as number[]];
  return list as number[][];
}

/**
 * A unit vector of `dim` floats for a token list: each token adds ±1 to two places chosen by its hash
 * (salted by the model), then the vector is normalised (vLLM's embedding models normalise by default).
 */
export function embedVector(tokens: ArrayLike<number>, model: string, seed: number, dim: number): Float32Array {
  const v = new Float64Array(dim);
  const salt = requestKey(seed, model, []);
  for (let i = 0; i < tokens.length; i++) {
    let h = Math.imul((tokens[i] ^ salt) | 0, 0x9e3779b1);
    for (let k = 0; k < 2; k++) {
      h ^= h >>> 15;
      h = Math.imul(h, 0x2c1b3c6d);
      h ^= h >>> 12;
      v[(h >>> 1) % dim] += h & 1 ? 1 : -1;
    }
  }
  let norm = 0;
  for (let j = 0; j < dim; j++) norm += v[j] * v[j];
  const out = new Float32Array(dim);
  if (norm === 0) {
    out[0] = 1;
    return out;
  }
  const inv = 1 / Math.sqrt(norm);
  for (let j = 0; j < dim; j++) out[j] = v[j] * inv;
  return out;
}

/** The first `dim` values of a unit vector, as a unit vector. */
function truncated(v: Float32Array, dim: number): Float32Array {
  if (dim >= v.length) return v;
  let norm = 0;
  for (let j = 0; j < dim; j++) norm += v[j] * v[j];
  const out = new Float32Array(dim);
  if (norm === 0) out[0] = 1;
  else for (let j = 0; j < dim; j++) out[j] = v[j] / Math.sqrt(norm);
  return out;
}

/** Float32 values as `encoding_format: "base64"` carries them: their little-endian bytes, in base64. */
export function base64Floats(v: Float32Array): string {
  const b = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) b.writeFloatLE(v[i], i * 4);
  return b.toString('base64');
}

/** POST /v1/embeddings. */
export function embeddingsAnswer(text: string, served: ServedModel, id: string): ApiAnswer {
  const p = parse(text, 'embeddings', served);
  if (isAnswer(p)) return p;
  const { body, model } = p;
  const dim = typeof body.dimensions === 'number' ? body.dimensions : EMBEDDING_DIM;
  if (dim > EMBEDDING_DIM) return refuse(`dimensions: the model's embeddings have ${EMBEDDING_DIM} dimensions; asked for ${dim}.`, 'dimensions');
  const lists = inputTokens(body.input);
  let promptTokens = 0;
  const base64 = body.encoding_format === 'base64';
  const data = lists.map((tokens, index) => {
    promptTokens += tokens.length;
    if (tokens.length > served.maxModelLen) return null;
    // a smaller `dimensions` keeps the first ones, normalised again (as a Matryoshka model's do)
    const v = truncated(embedVector(tokens, model, served.seed, EMBEDDING_DIM), dim);
    return { index, object: 'embedding', embedding: base64 ? base64Floats(v) : Array.from(v) };
  });
  const tooLong = data.indexOf(null);
  if (tooLong >= 0) {
    return refuse(`This model's maximum context length is ${served.maxModelLen} tokens. However, input ${tooLong} has ${lists[tooLong].length} tokens.`, 'input');
  }
  const created = Math.floor(Date.now() / 1000);
  const usage = promptUsage(promptTokens);
  return { status: 200, body: JSON.stringify({ id: `embd-${id}`, object: 'list', created, model, data, usage }) };
}

/** How a cross-encoder would rate text `b` for text `a`: the cosine of their embeddings, mapped to 0–1. */
function relevance(a: ArrayLike<number>, b: ArrayLike<number>, model: string, seed: number): number {
  const va = embedVector(a, model, seed, EMBEDDING_DIM);
  const vb = embedVector(b, model, seed, EMBEDDING_DIM);
  let dot = 0;
  for (let j = 0; j < EMBEDDING_DIM; j++) dot += va[j] * vb[j];
  return Math.round(((1 + dot) / 2) * 1e6) / 1e6;
}

/** A pair's tokens over the model's length, as vLLM words it; null when every pair fits. */
function pairTooLong(pairs: Array<[ArrayLike<number>, ArrayLike<number>]>, served: ServedModel): ApiAnswer | null {
  for (const [a, b] of pairs) {
    const n = a.length + b.length;
    if (n > served.maxModelLen) return refuse(`This model's maximum context length is ${served.maxModelLen} tokens. However, you requested ${n} tokens in the input for a pair. Please reduce the length of the input.`);
  }
  return null;
}

/**
 * POST /v1/rerank (also /rerank and /v2/rerank): each document rated for the query, best first, the
 * first `top_n` when it is above 0; `{id, model, usage, results: [{index, document: {text}, relevance_score}]}`.
 */
export function rerankAnswer(text: string, served: ServedModel, id: string): ApiAnswer {
  const p = parse(text, 'rerank', served);
  if (isAnswer(p)) return p;
  const { body, model } = p;
  if (typeof body.query !== 'string') return refuse('query: the mock takes a text query only', 'query');
  const docs = body.documents;
  if (!Array.isArray(docs) || !docs.every((d) => typeof d === 'string')) return refuse('documents: the mock takes a list of text documents only', 'documents');
  const q = tokenize(body.query);
  const pairs = (docs as string[]).map((d) => [q, tokenize(d)] as [ArrayLike<number>, ArrayLike<number>]);
  const tooLong = pairTooLong(pairs, served);
  if (tooLong) return tooLong;
  let promptTokens = 0;
  const results = pairs.map(([a, b], index) => {
    promptTokens += a.length + b.length;
    return { index, document: { text: docs[index] as string }, relevance_score: relevance(a, b, model, served.seed) };
  });
  results.sort((x, y) => y.relevance_score - x.relevance_score || x.index - y.index);
  const topN = typeof body.top_n === 'number' && body.top_n > 0 ? body.top_n : results.length;
  const usage = { prompt_tokens: promptTokens, total_tokens: promptTokens };
  return { status: 200, body: JSON.stringify({ id: `rerank-${id}`, model, usage, results: results.slice(0, topN) }) };
}

/**
 * POST /v1/score (also /score), vLLM's: `text_1` and `text_2`, each a string or a list of strings, paired
 * one to one, or one to each; `{id, object: "list", created, model, data: [{index, object: "score",
 * score}], usage}`.
 */
export function scoreAnswer(text: string, served: ServedModel, id: string): ApiAnswer {
  const p = parse(text, 'score', served);
  if (isAnswer(p)) return p;
  const { body, model } = p;
  const side = (v: unknown): string[] | null => (typeof v === 'string' ? [v] : Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null);
  const left = side(body.text_1);
  const right = side(body.text_2);
  if (left === null || right === null) return refuse('text_1, text_2: the mock takes strings or lists of strings only', 'text_1');
  if (left.length > 1 && left.length !== right.length) return refuse('text_1 and text_2 must have the same number of items, or text_1 just one', 'text_1');
  const pairs = right.map((r, i) => [tokenize(left.length === 1 ? left[0] : left[i]), tokenize(r)] as [ArrayLike<number>, ArrayLike<number>]);
  const tooLong = pairTooLong(pairs, served);
  if (tooLong) return tooLong;
  let promptTokens = 0;
  const data = pairs.map(([a, b], index) => {
    promptTokens += a.length + b.length;
    return { index, object: 'score', score: relevance(a, b, model, served.seed) };
  });
  const created = Math.floor(Date.now() / 1000);
  const usage = promptUsage(promptTokens);
  return { status: 200, body: JSON.stringify({ id: `score-${id}`, object: 'list', created, model, data, usage }) };
}

/** A classify or pooling request's token lists: each of `input` (as embeddings'), or its `messages` rendered as for chat. */
function pooledTokens(body: Record<string, unknown>): ArrayLike<number>[] {
  return body.input !== undefined && body.input !== null ? inputTokens(body.input) : [tokenize(renderPrompt(body))];
}

/** An input over the model's length, as vLLM words it; null when every one fits. */
function overLength(lists: ArrayLike<number>[], served: ServedModel): ApiAnswer | null {
  const i = lists.findIndex((l) => l.length > served.maxModelLen);
  return i < 0 ? null : refuse(`This model's maximum context length is ${served.maxModelLen} tokens. However, input ${i} has ${lists[i].length} tokens.`, 'input');
}

/** The mock classifier's labels. */
export const CLASS_LABELS = ['negative', 'positive'] as const;

/**
 * A classify or pooling answer: the body checked as vLLM does (`input` as embeddings', or `messages`), then
 * one item per input made from its embedding by `item`; `{id, object: "list", created, model, data, usage}`.
 */
function perInputAnswer(
  text: string,
  kind: 'classify' | 'pooling',
  served: ServedModel,
  id: string,
  item: (v: Float32Array, index: number, body: Record<string, unknown>) => Record<string, unknown>,
): ApiAnswer {
  const p = parse(text, kind, served);
  if (isAnswer(p)) return p;
  const { body, model } = p;
  if (body.input !== undefined && body.input !== null) {
    const problem = embeddingInputProblem(body.input);
    if (problem) return { status: 400, refusal: vllmProblem(problem, body) };
  }
  const lists = pooledTokens(body);
  const tooLong = overLength(lists, served);
  if (tooLong) return tooLong;
  let promptTokens = 0;
  const data = lists.map((tokens, index) => {
    promptTokens += tokens.length;
    return item(embedVector(tokens, model, served.seed, EMBEDDING_DIM), index, body);
  });
  const created = Math.floor(Date.now() / 1000);
  const usage = promptUsage(promptTokens);
  return { status: 200, body: JSON.stringify({ id, object: 'list', created, model, data, usage }) };
}

/**
 * POST /classify: one `{index, label, probs, num_classes}` per input, the label the likelier class.
 * Deterministic: the probabilities come from the input's embedding.
 */
export function classifyAnswer(text: string, served: ServedModel, id: string): ApiAnswer {
  return perInputAnswer(text, 'classify', served, `classify-${id}`, (v, index) => {
    const positive = Math.round((1 / (1 + Math.exp(-4 * v[0]))) * 1e6) / 1e6;
    const probs = [Math.round((1 - positive) * 1e6) / 1e6, positive];
    return { index, label: CLASS_LABELS[positive > 0.5 ? 1 : 0], probs, num_classes: CLASS_LABELS.length };
  });
}

/**
 * POST /pooling: the pooled hidden state per input, `{index, object: "pooling", data}` (here the
 * embedding vector); `encoding_format: "base64"` as for embeddings.
 */
export function poolingAnswer(text: string, served: ServedModel, id: string): ApiAnswer {
  return perInputAnswer(text, 'pooling', served, `pool-${id}`, (v, index, body) => ({
    index,
    object: 'pooling',
    data: body.encoding_format === 'base64' ? base64Floats(v) : Array.from(v),
  }));
}

/** POST /tokenize: `{count, max_model_len, tokens, token_strs}` (a chat `messages` rendered as for chat). */
export function tokenizeAnswer(text: string, served: ServedModel): ApiAnswer {
  const p = parse(text, 'tokenize', served);
  if (isAnswer(p)) return p;
  const tokens = tokenize(renderPrompt(p.body));
  const strs = p.body.return_token_strs === true ? Array.from(tokens, (t) => tokenText(t)) : null;
  return { status: 200, body: JSON.stringify({ count: tokens.length, max_model_len: served.maxModelLen, tokens: Array.from(tokens), token_strs: strs }) };
}

/**
 * A token's text. The mock's tokenizer is a hash (not invertible), so detokenizing gives a word per id:
 * the same ids always give the same text.
 */
function tokenText(id: number): string {
  return TOKEN_TEXT[tokenWord(id, 0)];
}

/** POST /detokenize: `{prompt}`; an id outside the vocabulary is refused. */
export function detokenizeAnswer(text: string, served: ServedModel): ApiAnswer {
  const p = parse(text, 'detokenize', served);
  if (isAnswer(p)) return p;
  const tokens = p.body.tokens as number[];
  const bad = tokens.find((t) => t >= VOCAB_SIZE);
  if (bad !== undefined) return refuse(`Token id ${bad} is out of vocabulary (${VOCAB_SIZE} tokens).`, 'tokens');
  let prompt = '';
  for (const t of tokens) prompt += tokenText(t);
  return { status: 200, body: JSON.stringify({ prompt }) };
}

/** The answer vLLM gives for a `previous_response_id` its store does not hold (serving_responses.py). */
function unknownResponse(id: string): ApiAnswer {
  return { status: 404, refusal: { status: 404, message: `Response with id '${id}' not found.`, param: 'response_id', type: 'invalid_request_error' } };
}

/** What renderPrompt ends every chat prompt with. */
const ASSISTANT_TURN = '<|assistant|>\n';

/** How many leading tokens two token lists share. */
function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * POST /v1/responses, a minimal Responses API: `input` (a string or messages) and `instructions` make
 * the prompt, the answer is one assistant message of `max_output_tokens` words (or a length of its own),
 * whole or as the Responses API's stream of typed events. With a `store` that is on, an answer made with
 * `store` not false is kept there under its id; `previous_response_id` continues a kept answer as vLLM
 * does: the prompt is the new `instructions`, the stored conversation, its output as an assistant
 * message, then the new input. Its `cached_tokens` are the leading tokens it shares with the stored
 * conversation and its output (this server computed them: its prefix cache holds them). An id the store
 * does not hold gets vLLM's 404.
 */
export function responsesAnswer(text: string, served: ServedModel, id: string, store?: ResponseStore): ApiAnswer {
  const p = parse(text, 'responses', served);
  if (isAnswer(p)) return p;
  const { body, model } = p;
  const prevId = body.previous_response_id;
  if (prevId !== undefined && prevId !== null && typeof prevId !== 'string') {
    return refuse('previous_response_id: Input should be a valid string', 'previous_response_id');
  }
  const background = body.background === true;
  if (background && body.store === false) return refuse('background can only be used when `store` is true', 'background');
  if (background && store?.enabled !== true) {
    return refuse('This vLLM engine does not support `store=True` and therefore does not support the background mode.', 'background');
  }
  const prev = typeof prevId === 'string' ? store?.get(prevId) : undefined;
  if (typeof prevId === 'string' && prev === undefined) return unknownResponse(prevId);
  const prompt = promptBodyOf('responses', body) as { messages: unknown[] };
  let earlier: unknown[] | undefined;
  if (prev !== undefined) {
    // [new instructions] + the stored conversation + its answer + the new input (vLLM's order)
    const system = typeof body.instructions === 'string' ? 1 : 0;
    earlier = [...prev.messages, { role: 'assistant', content: prev.output }];
    prompt.messages = [...prompt.messages.slice(0, system), ...earlier, ...prompt.messages.slice(system)];
  }
  const tokens = tokenize(renderPrompt(prompt));
  // the stored conversation as this server rendered it (without the open assistant turn at its end)
  const cached = earlier === undefined ? 0 : commonPrefix(tokenize(renderPrompt({ messages: earlier }).slice(0, -ASSISTANT_TURN.length)), tokens);
  if (tokens.length === 0) return refuse('The prompt cannot be empty.', 'input');
  if (tokens.length >= served.maxModelLen) {
    return refuse(`This model's maximum context length is ${served.maxModelLen} tokens. However, your request has ${tokens.length} input tokens.`, 'input');
  }
  const key = requestKey(served.seed, model, tokens);
  const capped = typeof body.max_output_tokens === 'number';
  const n = Math.max(1, Math.min(capped ? (body.max_output_tokens as number) : naturalLength(key), served.maxModelLen - tokens.length));
  const words: string[] = [];
  for (let i = 0; i < n; i++) words.push(TOKEN_TEXT[tokenWord(key, i)]);
  const out = words.join('');
  const created = Math.floor(Date.now() / 1000);
  const respId = `resp_${id}`;
  const msgId = `msg_${id}`;
  const usage = {
    input_tokens: tokens.length,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: n,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: tokens.length + n,
  };
  const part = (t: string) => ({ type: 'output_text', text: t, annotations: [], logprobs: null });
  const message = (status: string, content: unknown[]) => ({ id: msgId, type: 'message', role: 'assistant', status, content });
  const response = (status: string, output: unknown[], u: unknown) => ({
    id: respId,
    object: 'response',
    created_at: created,
    model,
    status,
    instructions: typeof body.instructions === 'string' ? body.instructions : null,
    max_output_tokens: capped ? body.max_output_tokens : null,
    incomplete_details: capped && n === body.max_output_tokens ? { reason: 'max_output_tokens' } : null,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    temperature: typeof body.temperature === 'number' ? body.temperature : 1,
    top_p: typeof body.top_p === 'number' ? body.top_p : 1,
    error: null,
    metadata: {},
    previous_response_id: typeof prevId === 'string' ? prevId : null,
    store: store?.enabled === true && body.store !== false,
    usage: u,
  });
  const done = response(capped && n === body.max_output_tokens ? 'incomplete' : 'completed', [message('completed', [part(out)])], usage);
  // the stream: typed events, each `event: TYPE` + `data: {...}`, numbered
  const events: Array<{ sequence: number; text: string }> = [];
  let seq = 0;
  const event = (type: string, fields: Record<string, unknown>) => {
    events.push({ sequence: seq, text: `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n` });
  };
  const where = { item_id: msgId, output_index: 0, content_index: 0 };
  event('response.created', { response: response('in_progress', [], null) });
  event('response.in_progress', { response: response('in_progress', [], null) });
  event('response.output_item.added', { output_index: 0, item: message('in_progress', []) });
  event('response.content_part.added', { ...where, part: part('') });
  for (const w of words) event('response.output_text.delta', { ...where, delta: w, logprobs: [] });
  event('response.output_text.done', { ...where, text: out, logprobs: [] });
  event('response.content_part.done', { ...where, part: part(out) });
  event('response.output_item.done', { output_index: 0, item: message('completed', [part(out)]) });
  event(done.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: done });
  if (background) {
    // vLLM answers at once with the response queued, and generates it meanwhile (the server completes it)
    const queued = response('queued', [], null);
    store!.set(respId, { messages: prompt.messages, output: out, response: queued, events, pending: done });
    return { status: 200, body: JSON.stringify(queued), background: { id: respId, tokens: n } };
  }
  if (store?.enabled && body.store !== false) store.set(respId, { messages: prompt.messages, output: out, response: done, events });
  if (body.stream !== true) return { status: 200, body: JSON.stringify(done) };
  return { status: 200, body: events.map((e) => e.text).join(''), contentType: 'text/event-stream' };
}

/**
 * GET /v1/responses/{id}, as vLLM answers it (serving_responses.py, retrieve_responses): the stored response
 * as it is now (a background one: queued until it completes, or cancelled); vLLM's 404 for an id this
 * server does not hold. With `?stream=true` its events are replayed (after `starting_after`, a sequence
 * number), as vLLM replays a background response's; the mock replays any stored response's.
 */
export function retrieveAnswer(id: string, query: string, store: ResponseStore): ApiAnswer {
  const r = store.get(id);
  if (r === undefined) return unknownResponse(id);
  const params = new URLSearchParams(query);
  const stream = params.get('stream');
  if (stream === null || !/^(true|1|yes|on)$/i.test(stream)) return { status: 200, body: JSON.stringify(r.response) };
  const after = params.get('starting_after');
  const from = after === null ? -1 : Number(after);
  if (!Number.isInteger(from)) return refuse('starting_after: Input should be a valid integer', 'starting_after');
  return { status: 200, body: r.events.filter((e) => e.sequence > from).map((e) => e.text).join(''), contentType: 'text/event-stream' };
}

/**
 * POST /v1/responses/{id}/cancel, as vLLM answers it (serving_responses.py, cancel_responses): a response
 * still queued or in progress (a background one) becomes `cancelled`, and is answered; any other (one that
 * completed, or was cancelled before) gets vLLM's 400 "Cannot cancel a synchronous response."; an id this
 * server does not hold, its 404.
 */
export function cancelAnswer(id: string, store: ResponseStore): ApiAnswer {
  const r = store.get(id);
  if (r === undefined) return unknownResponse(id);
  const status = r.response.status;
  if (status !== 'queued' && status !== 'in_progress') {
    return { status: 400, refusal: { status: 400, message: 'Cannot cancel a synchronous response.', param: null, type: 'invalid_request_error' } };
  }
  r.pending = undefined;
  r.response = { ...r.response, status: 'cancelled' };
  return { status: 200, body: JSON.stringify(r.response) };
}

// ---------------------------------------------------------------- speech to text

/** Bytes of audio a second, as the mock reckons an upload's length: 16 kHz 16-bit mono PCM, Whisper's input. */
export const AUDIO_BYTES_PER_S = 32_000;
/** Encoder positions a second of audio (Whisper: 1,500 for 30 s), counted as a stream's prompt tokens. */
const AUDIO_TOKENS_PER_S = 50;
const AUDIO_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'];

/** An audio request's form: its fields (a file as its name and size) and the audio file's bytes. */
export interface AudioRequest {
  fields: ReadonlyMap<string, readonly FormValue[]>;
  audio: Uint8Array;
}

/** "00:00:07,000" (SubRip) or "00:00:07.000" (WebVTT). */
function clock(seconds: number, sep: ',' | '.'): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}:${two(seconds % 60)}${sep}000`;
}

/**
 * A transcription or translation, as vLLM's speech-to-text server answers one: the audio's length reckoned
 * from its size (AUDIO_BYTES_PER_S, one second at least), about 2.5 words a second chosen by a hash of the
 * audio, in the asked `response_format` (json with usage in audio seconds, text, srt, vtt, verbose_json
 * with one segment), or with `stream` as chunks of one word each (`transcription.chunk` /
 * `translation.chunk`), a usage chunk when `stream_include_usage`, and `[DONE]`.
 */
export function audioAnswer(kind: AudioKind, req: AudioRequest, served: ServedModel, id: string): ApiAnswer {
  const one = (name: string) => {
    const v = req.fields.get(name)?.[0];
    return typeof v === 'string' ? v : undefined;
  };
  const problem = audioFormProblem(req.fields);
  if (problem) {
    const r = vllmProblem(problem, {});
    return { status: r.status, refusal: r };
  }
  const modelField = req.fields.get('model')?.[0];
  if (modelField !== undefined && typeof modelField !== 'string') return refuse('model: Input should be a valid string', 'model');
  const model = modelField === undefined || modelField === '' ? served.model : modelField;
  if (model !== served.model && !served.loras.includes(model)) return refuse(`The model \`${model}\` does not exist.`, 'model', 404);
  const format = one('response_format') ?? 'json';
  if (!AUDIO_FORMATS.includes(format)) return refuse("response_format: Input should be 'json', 'text', 'srt', 'verbose_json' or 'vtt'", 'response_format');
  const stream = formBoolean(one('stream') ?? 'false') === true;
  const includeUsage = formBoolean(one('stream_include_usage') ?? 'false') === true;
  if (includeUsage && !stream) return refuse('Stream options can only be defined when `stream=True`.', 'stream_include_usage');

  const seconds = Math.max(1, Math.ceil(req.audio.length / AUDIO_BYTES_PER_S));
  const key = requestKey(served.seed, model, req.audio.subarray(0, 65_536), req.audio.length + (kind === 'translations' ? 1 : 0));
  const words: string[] = [];
  for (let i = 0, n = Math.max(1, Math.round(seconds * 2.5)); i < n; i++) words.push(TOKEN_TEXT[tokenWord(key, i)]);
  const text = words.join('');
  if (stream) {
    const object = kind === 'transcriptions' ? 'transcription.chunk' : 'translation.chunk';
    const chunkId = `${kind === 'transcriptions' ? 'trsc' : 'trsl'}-${id}`;
    const created = Math.floor(Date.now() / 1000);
    const event = (choices: unknown[], usage?: unknown) =>
      `data: ${JSON.stringify({ id: chunkId, object, created, model, choices, ...(usage !== undefined && { usage }) })}\n\n`;
    let body = '';
    words.forEach((w, i) => {
      body += event([{ delta: { content: w }, finish_reason: i === words.length - 1 ? 'stop' : null, stop_reason: null }]);
    });
    if (includeUsage) {
      const prompt = seconds * AUDIO_TOKENS_PER_S;
      body += event([], { prompt_tokens: prompt, completion_tokens: words.length, total_tokens: prompt + words.length });
    }
    return { status: 200, body: body + 'data: [DONE]\n\n', contentType: 'text/event-stream' };
  }
  const trimmed = text.trimStart();
  switch (format) {
    case 'text':
      return { status: 200, body: trimmed, contentType: 'text/plain; charset=utf-8' };
    case 'srt':
      return { status: 200, body: `1\n${clock(0, ',')} --> ${clock(seconds, ',')}\n${trimmed}\n\n`, contentType: 'text/plain; charset=utf-8' };
    case 'vtt':
      return { status: 200, body: `WEBVTT\n\n${clock(0, '.')} --> ${clock(seconds, '.')}\n${trimmed}\n\n`, contentType: 'text/plain; charset=utf-8' };
    case 'verbose_json': {
      const segment = { id: 0, seek: 0, start: 0, end: seconds, text, tokens: words.map((_, i) => tokenWord(key, i)), temperature: 0, avg_logprob: -0.25, compression_ratio: 1.2, no_speech_prob: 0.01 };
      return { status: 200, body: JSON.stringify({ duration: String(seconds), language: one('language') ?? 'en', text, segments: [segment], words: null }) };
    }
    default:
      return { status: 200, body: JSON.stringify({ text, usage: { type: 'duration', seconds } }) };
  }
}
