/**
 * Seeded pseudo-random numbers and integer hashing for the simulator. No Math.random anywhere in sim/:
 * the same seed gives the same stream on every machine (32-bit integer arithmetic only).
 */

/** mulberry32: a small, fast 32-bit PRNG. Returns a function giving floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit avalanche mix (murmur3's finalizer). */
export function mix32(x: number): number {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Hash of two 32-bit integers (order matters). */
export function hash2(a: number, b: number): number {
  return mix32(Math.imul(mix32(a) ^ 0x9e3779b9, 0x01000193) ^ mix32(b + 0x7f4a7c15));
}

/** FNV-1a of a string, mixed; 32-bit unsigned. */
export function hashStr(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return mix32(h);
}

/** A seeded random source with the helpers the generators need. */
export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  /** Float in [0, 1). */
  float(): number {
    return this.next();
  }
  /** Integer in [lo, hi] inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** Exponentially distributed with the given mean. */
  exp(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }
  /** Log-normal with the given median and sigma (of the underlying normal). */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }
  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
  /** Index in [0, n) with Zipf-like popularity (weight 1/(i+1)^s). */
  zipf(n: number, s = 1): number {
    let total = 0;
    for (let i = 0; i < n; i++) total += 1 / Math.pow(i + 1, s);
    let r = this.next() * total;
    for (let i = 0; i < n; i++) {
      r -= 1 / Math.pow(i + 1, s);
      if (r < 0) return i;
    }
    return n - 1;
  }
  /** A random element. */
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)];
  }
}
