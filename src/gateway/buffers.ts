/** Byte-chunk helpers shared by the front (request bodies) and the relay (answers). */

export const EMPTY = Buffer.alloc(0);

/** Chunks as one buffer, without a copy when there is only one. */
export function joined(chunks: Buffer[]): Buffer {
  return chunks.length === 0 ? EMPTY : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}
