/**
 * Admission of one completion request, as vLLM's OpenAI server decides it: the body's structure (shared
 * with the gateway: openai/validate.ts) worded the vLLM way, then the mock's own checks (served model or
 * adapter, one choice per request, max tokens ≥ 1, a non-empty prompt within the context length and the
 * KV cache). An admitted request comes out tokenized, with the answer length it will get. Pure.
 */
import { tokenize } from '../engine/index.js';
import { renderPrompt } from '../openai/prompt.js';
import { bodyProblem, type ApiKind, type BodyProblem } from '../openai/validate.js';
import { naturalLength, requestKey } from './text.js';

/** What the server serves, as admission needs it. */
export interface ServedModel {
  /** the base model's name (the default when a body names none) */
  model: string;
  loras: readonly string[];
  /** the output text seed (`--seed`) */
  seed: number;
  maxModelLen: number;
  /** tokens the KV cache holds in all */
  kvCapacityTokens: number;
}

export interface AdmittedRequest {
  /** the model asked for: the base model or an adapter */
  model: string;
  /** the adapter, when the model asked for is one */
  lora: string | undefined;
  tokens: Uint32Array;
  /** tokens the answer will have */
  maxTokens: number;
  /** `length` when the client capped the answer, `stop` for a natural end */
  finishReason: 'length' | 'stop';
  stream: boolean;
  includeUsage: boolean;
  /** the request's text key: its answer's words derive from it */
  key: number;
}

/** An error answer: status, message, and the field at fault. */
export interface Refusal {
  status: 400 | 404;
  message: string;
  param: string | null;
  /** the error's `type` when vLLM names one itself (else the status's: BadRequestError, NotFoundError) */
  type?: string;
}

export type Admission = { ok: true; request: AdmittedRequest } | { ok: false; refusal: Refusal };

function refuse(message: string, param: string | null = null, status: 400 | 404 = 400): Admission {
  return { ok: false, refusal: { status, message, param } };
}

/** A structural problem in vLLM's (pydantic's) words. */
export function vllmProblem(p: BodyProblem, body: Record<string, unknown>): Refusal {
  switch (p.issue) {
    case 'not_boolean':
      return { status: 400, message: 'stream: Input should be a valid boolean', param: 'stream' };
    case 'missing':
      if (p.param === 'input') return { status: 400, message: 'input: Field required', param: 'input' };
      if (p.param === 'query') return { status: 400, message: 'query: Field required (a string)', param: 'query' };
      return p.param === 'messages'
        ? { status: 400, message: 'messages: Field required (a non-empty list)', param: 'messages' }
        : { status: 400, message: 'prompt: Field required (a string or a list)', param: 'prompt' };
    case 'bad_input':
      return { status: 400, message: 'input: Input should be a non-empty string, a list of strings, a list of token ids or a list of lists of token ids', param: 'input' };
    case 'too_many':
      return { status: 400, message: 'input: List should have at most 2048 items', param: 'input' };
    case 'bad_encoding':
      return { status: 400, message: "encoding_format: Input should be 'float' or 'base64'", param: 'encoding_format' };
    case 'prompt_and_messages':
      return { status: 400, message: 'Either prompt or messages must be given, not both', param: 'prompt' };
    case 'bad_tokens':
      return { status: 400, message: 'tokens: Input should be a list of token ids', param: 'tokens' };
    case 'bad_message':
      return { status: 400, message: 'messages: Input should be a list of objects with a string role', param: 'messages' };
    case 'bad_documents':
      return { status: 400, message: 'documents: Input should be a valid list', param: 'documents' };
    case 'missing_pair':
      return { status: 400, message: 'text_1, text_2: Field required', param: 'text_1' };
    case 'missing_file':
      return { status: 400, message: 'file: Field required (an uploaded file)', param: 'file' };
    case 'duplicate':
      return { status: 400, message: `${p.param}: Input should be a single value, got several`, param: p.param };
    case 'not_integer': {
      const value = body[p.param];
      // an integer below the least value: the mock's own wording of the same limits below
      if (Number.isInteger(value)) return p.param === 'n' ? nOnlyOne() : atLeastOne(p.param, value as number);
      return { status: 400, message: `${p.param}: Input should be a valid integer`, param: p.param };
    }
  }
}

function nOnlyOne(): Refusal {
  // vLLM runs n > 1 as n sequences; the mock's engine models one per request, so it says so rather
  // than answering one choice where n were asked for.
  return { status: 400, message: 'n: the mock serves n = 1 only (one choice per request).', param: 'n' };
}

function atLeastOne(param: string, value: number): Refusal {
  return { status: 400, message: `${param} must be at least 1, got ${value}.`, param };
}

/** Decides on the body `text` of a `kind` request to a server serving `served`. */
export function admit(text: string, kind: ApiKind, served: ServedModel): Admission {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    return refuse(`JSON decode error: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return refuse('Input should be a valid dictionary or object to extract fields from');
  }
  const b = body as Record<string, unknown>;
  let lora: string | undefined;
  const model = b.model === undefined || b.model === null ? served.model : b.model;
  if (typeof model !== 'string') return refuse('model: Input should be a valid string', 'model');
  if (model !== served.model) {
    if (!served.loras.includes(model)) return refuse(`The model \`${model}\` does not exist.`, 'model', 404);
    lora = model;
  }
  const problem = bodyProblem(kind, b);
  if (problem !== null) return { ok: false, refusal: vllmProblem(problem, b) };
  if (b.n !== undefined && b.n !== null && b.n !== 1) return { ok: false, refusal: nOnlyOne() };
  // max_completion_tokens wins when both are given
  const mtParam = b.max_completion_tokens !== undefined && b.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const mtRaw = b[mtParam] as number | undefined | null;
  if (typeof mtRaw === 'number' && mtRaw < 1) return { ok: false, refusal: atLeastOne(mtParam, mtRaw) };

  const tokens = tokenize(renderPrompt(b));
  const promptLen = tokens.length;
  if (promptLen === 0) return refuse('The prompt cannot be empty.', 'prompt');
  const maxLen = served.maxModelLen;
  const capacity = served.kvCapacityTokens;
  const requested = typeof mtRaw === 'number' ? mtRaw : 0;
  if (promptLen + requested > maxLen || promptLen >= maxLen) {
    return refuse(
      typeof mtRaw === 'number'
        ? `This model's maximum context length is ${maxLen} tokens. However, you requested ${promptLen + requested} tokens (${promptLen} in the messages, ${requested} in the completion). Please reduce the length of the messages or completion.`
        : `This model's maximum context length is ${maxLen} tokens. However, your request has ${promptLen} input tokens. Please reduce the length of the input messages.`,
      'input_tokens',
    );
  }
  if (promptLen >= capacity) {
    return refuse(`The prompt (${promptLen} tokens) does not fit in the KV cache (${capacity} tokens).`, 'input_tokens');
  }

  const seedExtra = typeof b.seed === 'number' && Number.isInteger(b.seed) ? b.seed : 0;
  const key = requestKey(served.seed, model, tokens, seedExtra);
  // with max tokens: exactly that many, ending with `length`; without: a length of its own, ending with `stop`
  const capped = typeof mtRaw === 'number';
  const wanted = capped ? mtRaw : naturalLength(key);
  const maxTokens = Math.max(1, Math.min(wanted, maxLen - promptLen, capacity - promptLen));
  const stream = b.stream === true;
  const so = b.stream_options as Record<string, unknown> | undefined | null;
  const includeUsage = stream && so !== null && typeof so === 'object' && so.include_usage === true;
  return { ok: true, request: { model, lora, tokens, maxTokens, finishReason: capped ? 'length' : 'stop', stream, includeUsage, key } };
}
