/**
 * Seeded pseudo-random numbers and integer hashing for the simulator. No Math.random anywhere in sim/:
 * the same seed gives the same stream on every machine (32-bit integer arithmetic only).
 */

import { mix32, mulberry32 } from '../common/random.js';

export { mix32, mulberry32 };

/** Hash of two 32-bit integers (order matters). */
export function hash2(a: number, b: number): number {
  return mix32(Math.imul(mix32(a) ^ 0x9e3779b9, 0x01000193) ^ mix32(b + 0x7f4a7c15));
}

/** FNV-1a of a string, mixed; 32-bit unsigned (the router's own string hash). */
export { hashString as hashStr } from '../routing/hash.js';

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
