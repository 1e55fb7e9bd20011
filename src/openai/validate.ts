/**
 * The structure of an OpenAI request body that both the gateway and the mock model server rely on,
 * checked once here. Each front words a problem its own way (the gateway in OpenAI's style, the mock as
 * vLLM does) and may add checks of its own; what counts as well-formed is decided here. Pure.
 */

/**
 * The APIs the gateway routes by model: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
 * `/v1/responses`, and vLLM's `/tokenize`, `/detokenize`, `/v1/rerank` and `/v1/score` (a reranker's
 * or cross-encoder's: SGLang serves these two as well), `/classify` and `/pooling` (a classifier's or
 * reward model's, and any pooling model's raw output), and the audio APIs `/v1/audio/transcriptions` and
 * `/v1/audio/translations` (a speech-to-text model's: their bodies are multipart forms, see audioFormProblem).
 */
export type ApiKind =
  | 'chat' | 'completions' | 'embeddings' | 'responses' | 'tokenize' | 'detokenize' | 'rerank' | 'score' | 'classify' | 'pooling'
  | AudioKind;

/** The APIs whose bodies are multipart forms (an audio file and its fields), not JSON. */
export type AudioKind = 'transcriptions' | 'translations';

export function isAudioKind(kind: ApiKind): kind is AudioKind {
  return kind === 'transcriptions' || kind === 'translations';
}

/** The path each kind is served at (by the gateway and by the model server alike). */
export const API_PATHS: Readonly<Record<ApiKind, string>> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  responses: '/v1/responses',
  tokenize: '/tokenize',
  detokenize: '/detokenize',
  rerank: '/v1/rerank',
  score: '/v1/score',
  classify: '/classify',
  pooling: '/pooling',
  transcriptions: '/v1/audio/transcriptions',
  translations: '/v1/audio/translations',
};

/**
 * More paths vLLM serves an API at (its older `/rerank` and `/score`, and `/v2/rerank`, the same API under
 * Cohere's v2 name): the gateway serves them too and sends them on to the kind's path above, which vLLM and
 * SGLang both serve.
 */
export const API_ALIAS_PATHS: Readonly<Record<string, ApiKind>> = {
  '/rerank': 'rerank',
  '/v2/rerank': 'rerank',
  '/score': 'score',
};

/** The integer fields checked, with the least value each may take. */
const INTEGER_FIELDS = [
  ['max_tokens', 0],
  ['max_completion_tokens', 0],
  ['max_output_tokens', 1],
  ['dimensions', 1],
  ['n', 1],
] as const;

export type IntegerField = (typeof INTEGER_FIELDS)[number][0];

/** The most inputs one embeddings request may carry (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048;

/** The largest token id a body may carry (a 32-bit unsigned integer, as every tokenizer's ids fit). */
const MAX_TOKEN_ID = 0xffffffff;

export type BodyProblem =
  | { param: 'stream'; issue: 'not_boolean' }
  | { param: 'messages'; issue: 'missing' | 'bad_message' }
  | { param: 'prompt'; issue: 'missing' }
  | { param: 'input'; issue: 'missing' | 'bad_input' | 'too_many' }
  | { param: 'encoding_format'; issue: 'bad_encoding' }
  | { param: 'prompt'; issue: 'prompt_and_messages' }
  | { param: 'tokens'; issue: 'bad_tokens' }
  | { param: 'query'; issue: 'missing' }
  | { param: 'documents'; issue: 'bad_documents' }
  | { param: 'text_1'; issue: 'missing_pair' }
  | { param: 'file'; issue: 'missing_file' }
  | { param: 'model' | 'stream' | 'file'; issue: 'duplicate' }
  | { param: IntegerField; issue: 'not_integer'; min: number };

/** A field that is there: JSON's null counts as absent, as OpenAI's and vLLM's servers read it. */
function given(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function isTokenId(v: unknown): boolean {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_TOKEN_ID;
}

/** A non-empty list of token ids. */
function isTokenList(v: unknown): boolean {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (const x of v) if (!isTokenId(x)) return false;
  return true;
}

/**
 * An embeddings `input`, as OpenAI takes it: a non-empty string, a list of non-empty strings, a list of
 * token ids, or a list of lists of token ids (no more than MAX_EMBEDDING_INPUTS in a list).
 */
export function embeddingInputProblem(input: unknown): BodyProblem | null {
  if (input === undefined || input === null) return { param: 'input', issue: 'missing' };
  if (typeof input === 'string') return input.length > 0 ? null : { param: 'input', issue: 'bad_input' };
  if (!Array.isArray(input) || input.length === 0) return { param: 'input', issue: 'bad_input' };
  if (input.length > MAX_EMBEDDING_INPUTS) return { param: 'input', issue: 'too_many' };
  const first = input[0];
  if (typeof first === 'string') {
    for (const s of input) if (typeof s !== 'string' || s.length === 0) return { param: 'input', issue: 'bad_input' };
  } else if (typeof first === 'number') {
    if (!isTokenList(input)) return { param: 'input', issue: 'bad_input' };
  } else {
    for (const l of input) if (!isTokenList(l)) return { param: 'input', issue: 'bad_input' };
  }
  return null;
}

/** A list of chat messages: non-empty, each an object with a string `role`. */
function messagesProblem(messages: unknown): BodyProblem | null {
  if (!Array.isArray(messages) || messages.length === 0) return { param: 'messages', issue: 'missing' };
  for (const m of messages) {
    if (m === null || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string') {
      return { param: 'messages', issue: 'bad_message' };
    }
  }
  return null;
}

/**
 * The first structural problem of a parsed body (an object), or null. Checked in this order: `stream` is
 * a boolean (or null); then per kind:
 * - chat: `messages` is a non-empty list of objects with a string `role`;
 * - completions: `prompt` is a string or a non-empty list;
 * - embeddings: `input` (see embeddingInputProblem), `encoding_format` "float" or "base64" when present;
 * - responses: `input` is a string or a non-empty list;
 * - tokenize: `prompt` (a string) or `messages` (as chat's), not both;
 * - detokenize: `tokens` is a non-empty list of token ids;
 * - rerank: `query` is a string or an object (vLLM's multimodal form), `documents` a list or an object;
 * - score: both `text_1` and `text_2` (vLLM's), or both `query` and `items` (SGLang's), each not null;
 * - classify, pooling: `input` (not null), or else `messages` (as chat's);
 * then `max_tokens`, `max_completion_tokens` ≥ 0, `max_output_tokens`, `dimensions` and `n` ≥ 1 are integers
 * when present (null counts as absent).
 */
export function bodyProblem(kind: ApiKind, body: Record<string, unknown>): BodyProblem | null {
  if ('stream' in body && body.stream !== null && typeof body.stream !== 'boolean') return { param: 'stream', issue: 'not_boolean' };
  const p = kindProblem(kind, body);
  if (p) return p;
  for (const [param, min] of INTEGER_FIELDS) {
    const v = body[param];
    if (given(v) && !(Number.isInteger(v) && (v as number) >= min)) return { param, issue: 'not_integer', min };
  }
  return null;
}

function kindProblem(kind: ApiKind, body: Record<string, unknown>): BodyProblem | null {
  switch (kind) {
    case 'chat':
      return messagesProblem(body.messages);
    case 'completions': {
      const p = body.prompt;
      return typeof p === 'string' || (Array.isArray(p) && p.length > 0) ? null : { param: 'prompt', issue: 'missing' };
    }
    case 'embeddings': {
      const p = embeddingInputProblem(body.input);
      if (p) return p;
      const f = body.encoding_format;
      return f === undefined || f === null || f === 'float' || f === 'base64' ? null : { param: 'encoding_format', issue: 'bad_encoding' };
    }
    case 'responses': {
      const i = body.input;
      return typeof i === 'string' || (Array.isArray(i) && i.length > 0) ? null : { param: 'input', issue: 'missing' };
    }
    case 'tokenize': {
      const hasPrompt = given(body.prompt);
      const hasMessages = given(body.messages);
      if (hasPrompt && hasMessages) return { param: 'prompt', issue: 'prompt_and_messages' };
      if (hasMessages) return messagesProblem(body.messages);
      return typeof body.prompt === 'string' ? null : { param: 'prompt', issue: 'missing' };
    }
    case 'detokenize':
      return isTokenList(body.tokens) ? null : { param: 'tokens', issue: 'bad_tokens' };
    case 'rerank': {
      const q = body.query;
      if (typeof q !== 'string' && (q === null || typeof q !== 'object' || Array.isArray(q))) return { param: 'query', issue: 'missing' };
      const d = body.documents;
      return d !== null && typeof d === 'object' ? null : { param: 'documents', issue: 'bad_documents' };
    }
    case 'score': {
      return (given(body.text_1) && given(body.text_2)) || (given(body.query) && given(body.items)) ? null : { param: 'text_1', issue: 'missing_pair' };
    }
    case 'classify':
    case 'pooling':
      if (given(body.input)) return null;
      return given(body.messages) ? messagesProblem(body.messages) : { param: 'input', issue: 'missing' };
    case 'transcriptions':
    case 'translations':
      return null; // (their bodies are forms: audioFormProblem)
  }
}

/** A multipart form's value: a text field, or a file part (its name and size). */
export type FormValue = string | { filename: string; size: number };

/**
 * A form field as pydantic reads a boolean (vLLM's form models): true, false, or undefined when the text
 * is not one of its words.
 */
export function formBoolean(v: string): boolean | undefined {
  const s = v.trim().toLowerCase();
  if (s === 'true' || s === '1' || s === 'yes' || s === 'on' || s === 't' || s === 'y') return true;
  if (s === 'false' || s === '0' || s === 'no' || s === 'off' || s === 'f' || s === 'n') return false;
  return undefined;
}

/**
 * The first structural problem of an audio API's form (each field name with its values in order), or
 * null: exactly one `file`, a file part; at most one `model` and one `stream` (the gateway and the server
 * must read the same), `stream` a boolean as pydantic reads one. Whether `model` must be there is the
 * front's to say (vLLM then takes its served model; the gateway routes by it).
 */
export function audioFormProblem(fields: ReadonlyMap<string, readonly FormValue[]>): BodyProblem | null {
  const files = fields.get('file');
  if (files === undefined) return { param: 'file', issue: 'missing_file' };
  if (files.length > 1) return { param: 'file', issue: 'duplicate' };
  if (typeof files[0] === 'string') return { param: 'file', issue: 'missing_file' };
  const models = fields.get('model');
  if (models !== undefined && models.length > 1) return { param: 'model', issue: 'duplicate' };
  const streams = fields.get('stream');
  if (streams !== undefined) {
    if (streams.length > 1) return { param: 'stream', issue: 'duplicate' };
    if (typeof streams[0] !== 'string' || formBoolean(streams[0]) === undefined) return { param: 'stream', issue: 'not_boolean' };
  }
  return null;
}

/** A problem in the words of OpenAI's API (the gateway's answers). */
export function problemMessage(p: BodyProblem): string {
  switch (p.issue) {
    case 'not_boolean':
      return 'The "stream" field must be a boolean.';
    case 'bad_message':
      return 'Each message must be an object with a string "role".';
    case 'missing':
      if (p.param === 'messages') return 'The "messages" field is required and must be a non-empty array.';
      if (p.param === 'input') return 'The "input" field is required.';
      if (p.param === 'query') return 'The "query" field is required and must be a string.';
      return 'The "prompt" field is required and must be a string or a non-empty array.';
    case 'bad_input':
      return 'The "input" field must be a non-empty string, an array of non-empty strings, an array of token ids or an array of arrays of token ids.';
    case 'too_many':
      return `The "input" field may hold at most ${MAX_EMBEDDING_INPUTS} items.`;
    case 'bad_encoding':
      return 'The "encoding_format" field must be "float" or "base64".';
    case 'prompt_and_messages':
      return 'Give either "prompt" or "messages", not both.';
    case 'bad_tokens':
      return 'The "tokens" field is required and must be a non-empty array of token ids (non-negative integers).';
    case 'bad_documents':
      return 'The "documents" field is required and must be an array.';
    case 'missing_pair':
      return 'Give the texts to score as "text_1" and "text_2".';
    case 'missing_file':
      return 'The "file" field is required and must be a file (a form part with a filename).';
    case 'duplicate':
      return `The "${p.param}" field appears more than once.`;
    case 'not_integer':
      return p.min > 0 ? `The "${p.param}" field must be a positive integer.` : `The "${p.param}" field must be a non-negative integer.`;
  }
}
