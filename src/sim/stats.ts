/** Percentiles and summaries, rounded so the JSON is stable and readable. */
import type { PerRequestItl, Summary } from './types.js';

/** A growable Float64Array (ITL samples can number in the hundreds of thousands). */
export class Samples {
  private buf = new Float64Array(1024);
  length = 0;
  push(x: number): void {
    if (this.length === this.buf.length) {
      const nb = new Float64Array(this.buf.length * 2);
      nb.set(this.buf);
      this.buf = nb;
    }
    this.buf[this.length++] = x;
  }
  /** The samples in the order pushed (a view: valid until the next push). */
  values(): Float64Array {
    return this.buf.subarray(0, this.length);
  }
  /** A sorted copy of the samples. */
  sorted(): Float64Array {
    return this.buf.slice(0, this.length).sort();
  }
}

/** Linear-interpolated percentile (q in [0, 1]) of an ascending array; 0 when empty. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return 0;
  const pos = (n - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return 0;
  const f = 10 ** digits;
  const r = Math.round(x * f) / f;
  return Object.is(r, -0) ? 0 : r;
}

export function summarize(s: Samples | number[]): Summary {
  const sorted = s instanceof Samples ? s.sorted() : Float64Array.from(s).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i];
  return {
    p50: round(percentile(sorted, 0.5)),
    p90: round(percentile(sorted, 0.9)),
    p99: round(percentile(sorted, 0.99)),
    mean: round(sorted.length ? sum / sorted.length : 0),
  };
}

/**
 * Per-request ITL (`RunFigures.itl_per_request_ms`): each request's gaps between tokens (any order) → its
 * mean and its p99 (interpolated, as `summarize`), then those summarized over the requests that have a gap.
 */
export function perRequestItl(gapsPerRequest: Iterable<ArrayLike<number>>): PerRequestItl {
  const means: number[] = [];
  const p99s: number[] = [];
  for (const gaps of gapsPerRequest) {
    if (gaps.length === 0) continue;
    const sorted = Float64Array.from(gaps).sort();
    let sum = 0;
    for (let i = 0; i < sorted.length; i++) sum += sorted[i];
    means.push(sum / sorted.length);
    p99s.push(percentile(sorted, 0.99));
  }
  return { requests: means.length, mean: summarize(means), p99: summarize(p99s) };
}
