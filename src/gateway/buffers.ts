/** Byte-chunk helpers: the empty buffer (bodies and answers) and joining an answer's chunks (the relay). */

export const EMPTY = Buffer.alloc(0);

/** Chunks as one buffer, without a copy when there is only one. */
export function joined(chunks: Buffer[]): Buffer {
  return chunks.length === 0 ? EMPTY : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}
