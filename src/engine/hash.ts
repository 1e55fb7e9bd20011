/**
 * Prefix-cache block hashes, as vLLM's automatic prefix caching computes them: one hash per *full* block
 * of `blockSize` tokens, chained (block i's hash covers block i-1's hash and block i's token ids), and
 * salted by the LoRA adapter so that different adapters never share blocks.
 *
 * The hash is two 32-bit murmur-style lanes packed into one 53-bit integer held in a double (a Map key
 * with no allocation). Collisions are astronomically unlikely at the sizes simulated.
 *
 * Hash chains are memoized per token array (WeakMap), per salt and block size: the simulator asks about
 * the same prompt for every engine (oracle estimates, then add), and each call would otherwise rehash a
 * prompt of tens of thousands of tokens. A token array must therefore not be mutated after first use.
 */

const memo = new WeakMap<object, Map<number, Float64Array>>();
const saltCache = new Map<string, number>();

/** 32-bit salt for an adapter name; 0 for the base model. */
export function loraSalt(lora: string | undefined): number {
  if (lora === undefined || lora === '') return 0;
  let s = saltCache.get(lora);
  if (s === undefined) {
    let h = 0x9747b28c;
    for (let i = 0; i < lora.length; i++) h = Math.imul(h ^ lora.charCodeAt(i), 0x5bd1e995);
    h ^= h >>> 13;
    s = (h >>> 0) || 1;
    saltCache.set(lora, s);
  }
  return s;
}

/** Chain hashes of every full block of `tokens`. */
export function computeBlockHashes(tokens: ArrayLike<number>, blockSize: number, salt: number): Float64Array {
  const nBlocks = Math.floor(tokens.length / blockSize);
  const out = new Float64Array(nBlocks);
  let a = (salt ^ 0x3c6ef372) | 0;
  let b = (Math.imul(salt, 0x85ebca6b) ^ 0x1b873593) | 0;
  let t = 0;
  for (let blk = 0; blk < nBlocks; blk++) {
    for (let k = 0; k < blockSize; k++, t++) {
      const x = tokens[t] | 0;
      let k1 = Math.imul(x, 0xcc9e2d51);
      k1 = (k1 << 15) | (k1 >>> 17);
      k1 = Math.imul(k1, 0x1b873593);
      a ^= k1;
      a = (a << 13) | (a >>> 19);
      a = (Math.imul(a, 5) + 0xe6546b64) | 0;
      b = Math.imul(b ^ x, 0x01000193) + 0x7f4a7c15 | 0;
    }
    // finalize a copy of each lane (the running state keeps chaining)
    let fa = a ^ blk;
    fa ^= fa >>> 16; fa = Math.imul(fa, 0x85ebca6b); fa ^= fa >>> 13; fa = Math.imul(fa, 0xc2b2ae35); fa ^= fa >>> 16;
    let fb = b ^ (blk * 0x9e3779b9);
    fb ^= fb >>> 15; fb = Math.imul(fb, 0x2c1b3c6d); fb ^= fb >>> 12; fb = Math.imul(fb, 0x297a2d39); fb ^= fb >>> 15;
    out[blk] = (fa >>> 0) * 2097152 + (fb & 0x1fffff);
  }
  return out;
}

/** Memoized `computeBlockHashes`. */
export function blockHashes(tokens: ArrayLike<number>, blockSize: number, salt: number): Float64Array {
  const key = salt * 4096 + blockSize;
  const obj = tokens as unknown as object;
  let m = memo.get(obj);
  if (m === undefined) {
    m = new Map();
    memo.set(obj, m);
  }
  let h = m.get(key);
  if (h === undefined || h.length !== Math.floor(tokens.length / blockSize)) {
    h = computeBlockHashes(tokens, blockSize, salt);
    m.set(key, h);
  }
  return h;
}
