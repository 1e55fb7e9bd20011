/**
 * Deterministic output text. Token i of a request's answer is a word chosen by a hash of
 * (seed, request key, i): it depends only on `--seed` and the request, never on earlier requests, so two
 * mock servers with one seed answer a request alike.
 */
const WORDS = (
  'the of and to in is was for on that with as by at from it this be are or an which his her their ' +
  'model token cache block queue batch prefix route fast slow light river stone cloud green quiet ' +
  'bright north south east west small large early late open close young old warm cold paper glass ' +
  'song field night day rain wind'
).split(' ');
export const WORD_COUNT = 64;
export const TOKEN_TEXT: string[] = WORDS.slice(0, WORD_COUNT).map((w) => ' ' + w);
/** JSON-encoded token texts (with quotes), for building SSE chunks without JSON.stringify */
export const TOKEN_JSON: string[] = TOKEN_TEXT.map((t) => JSON.stringify(t));

/** 32-bit key of a request: seed, served model name and prompt token ids. */
export function requestKey(seed: number, model: string, tokens: ArrayLike<number>, extra = 0): number {
  let h = (0x811c9dc5 ^ seed ^ Math.imul(extra, 0x9e3779b1)) | 0;
  for (let i = 0; i < model.length; i++) h = Math.imul(h ^ model.charCodeAt(i), 0x01000193);
  for (let i = 0; i < tokens.length; i++) h = Math.imul(h ^ tokens[i], 0x01000193);
  return h >>> 0;
}

export function tokenWord(key: number, index: number): number {
  let h = (key ^ Math.imul(index + 1, 0x9e3779b1)) | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) & (WORD_COUNT - 1);
}

/** A "natural" answer length for requests without max_tokens (stands in for the model's EOS). */
export function naturalLength(key: number): number {
  return 16 + (tokenWord(key, -7) * 7 + tokenWord(key, -11)) % 240;
}
