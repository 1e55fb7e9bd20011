/**
 * The structure of an OpenAI request body that both the gateway and the mock model server rely on,
 * checked once here. Each front words a problem its own way (the gateway in OpenAI's style, the mock as
 * vLLM does) and may add checks of its own; what counts as well-formed is decided here. Pure.
 */

/** The two generation APIs: `/v1/chat/completions` and `/v1/completions`. */
export type ApiKind = 'chat' | 'completions';

/** The integer fields checked, with the least value each may take. */
const INTEGER_FIELDS = [
  ['max_tokens', 0],
  ['max_completion_tokens', 0],
  ['n', 1],
] as const;

export type IntegerField = (typeof INTEGER_FIELDS)[number][0];

export type BodyProblem =
  | { param: 'stream'; issue: 'not_boolean' }
  | { param: 'messages'; issue: 'missing' | 'bad_message' }
  | { param: 'prompt'; issue: 'missing' }
  | { param: IntegerField; issue: 'not_integer'; min: number };

/**
 * The first structural problem of a parsed body (an object), or null. Checked in this order: `stream` is
 * a boolean (or null); chat: `messages` is a non-empty list of objects with a string `role`; completions:
 * `prompt` is a string or a non-empty list; `max_tokens`, `max_completion_tokens` ≥ 0 and `n` ≥ 1 are
 * integers when present (null counts as absent).
 */
export function bodyProblem(kind: ApiKind, body: Record<string, unknown>): BodyProblem | null {
  if ('stream' in body && body.stream !== null && typeof body.stream !== 'boolean') return { param: 'stream', issue: 'not_boolean' };
  if (kind === 'chat') {
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) return { param: 'messages', issue: 'missing' };
    for (const m of messages) {
      if (m === null || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string') {
        return { param: 'messages', issue: 'bad_message' };
      }
    }
  } else {
    const p = body.prompt;
    if (typeof p !== 'string' && !(Array.isArray(p) && p.length > 0)) return { param: 'prompt', issue: 'missing' };
  }
  for (const [param, min] of INTEGER_FIELDS) {
    const v = body[param];
    if (v !== undefined && v !== null && !(Number.isInteger(v) && (v as number) >= min)) return { param, issue: 'not_integer', min };
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
      return p.param === 'messages'
        ? 'The "messages" field is required and must be a non-empty array.'
        : 'The "prompt" field is required and must be a string or a non-empty array.';
    case 'not_integer':
      return `The "${p.param}" field must be a non-negative integer.`;
  }
}
