/**
 * A deterministic tokenizer approximation.
 *
 * Real tokenizers (Llama 3's tiktoken BPE) average about 4 characters of English text per token. Here
 * the text is cut into fixed chunks of 4 UTF-16 code units from its start, and each chunk maps to an id
 * in Llama 3's vocabulary range [0, 128256) by a 32-bit hash. So:
 *  - the same text always gives the same tokens (across processes and runs);
 *  - a text that extends another one (a longer chat with the same leading messages) gives the same
 *    leading tokens, except possibly the last partial chunk — what prefix caching needs;
 *  - token count = ceil(chars / 4) = estimateTokens(text) (openai/tokens.ts, the one estimate).
 * Pure and fast (one pass, no allocation beyond the result).
 */
import { CHARS_PER_TOKEN } from '../openai/tokens.js';

export { CHARS_PER_TOKEN };
export const VOCAB_SIZE = 128256;

export function tokenize(text: string): Uint32Array {
  const n = text.length;
  const out = new Uint32Array(Math.ceil(n / CHARS_PER_TOKEN));
  let t = 0;
  for (let i = 0; i < n; i += CHARS_PER_TOKEN) {
    let h = 0x811c9dc5;
    const end = i + CHARS_PER_TOKEN < n ? i + CHARS_PER_TOKEN : n;
    for (let j = i; j < end; j++) h = Math.imul(h ^ text.charCodeAt(j), 0x01000193);
    h ^= h >>> 15;
    h = Math.imul(h, 0x2c1b3c6d);
    h ^= h >>> 12;
    out[t++] = (h >>> 0) % VOCAB_SIZE;
  }
  return out;
}
