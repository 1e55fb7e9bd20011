/**
 * The yardstick over *offered* requests (shared/spec/README.md, "Result JSON"): what share was shed, how
 * many requests met a latency objective (SLO attainment) and at what rate (goodput), and TTFT percentiles
 * in which a rejected or failed request counts as infinitely slow. Latency percentiles over completed
 * requests alone flatter a policy that rejects more; these do not. Pure: the simulator's run statistics and
 * the live benchmark feed it the same per-request facts.
 */
import { round } from './stats.js';

/** One latency objective: a request meets it when it completed with TTFT ≤ ttftMs and mean ITL ≤ itlMs. */
export interface SloSpec {
  ttftMs: number;
  itlMs: number;
}

/** The objectives used when none are given (the spec's example: 2 s to first token, 100 ms between tokens). */
export const DEFAULT_SLOS: readonly SloSpec[] = [{ ttftMs: 2000, itlMs: 100 }];

export interface SloFigure {
  ttft_ms: number;
  itl_ms: number;
  /** share of offered requests that completed within both bounds */
  attainment: number;
  /** those requests per second of the run */
  goodput_rps: number;
}

export interface OfferedFigures {
  /** rejected / requests */
  shed_share: number;
  slo: SloFigure[];
  /** percentiles over all offered requests; null where the percentile falls on a rejected or failed one */
  ttft_offered_ms: { p50: number | null; p90: number | null; p99: number | null };
}

/**
 * `ttftMs[i]` and `meanItlMs[i]` for request i: NaN when it did not complete (rejected, failed, unfinished).
 * A completed request with a single output token has no gap between tokens: its mean ITL is 0.
 */
export function offeredFigures(
  ttftMs: ArrayLike<number>,
  meanItlMs: ArrayLike<number>,
  rejected: number,
  durationS: number,
  slos: readonly SloSpec[] = DEFAULT_SLOS,
): OfferedFigures {
  const n = ttftMs.length;
  const offered = new Float64Array(n);
  for (let i = 0; i < n; i++) offered[i] = Number.isNaN(ttftMs[i]) ? Infinity : ttftMs[i];
  offered.sort();
  const pct = (q: number): number | null => {
    if (n === 0) return 0;
    // nearest rank, so that a percentile is one request's real value (or that request was never served)
    const v = offered[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))];
    return Number.isFinite(v) ? round(v) : null;
  };
  const slo = slos.map((s) => {
    let met = 0;
    for (let i = 0; i < n; i++) if (ttftMs[i] <= s.ttftMs && meanItlMs[i] <= s.itlMs) met++;
    return {
      ttft_ms: s.ttftMs,
      itl_ms: s.itlMs,
      attainment: round(n > 0 ? met / n : 0, 4),
      goodput_rps: round(durationS > 0 ? met / durationS : 0),
    };
  });
  return {
    shed_share: round(n > 0 ? rejected / n : 0, 4),
    slo,
    ttft_offered_ms: { p50: pct(0.5), p90: pct(0.9), p99: pct(0.99) },
  };
}

/** `--slo-ttft 1s,2s,5s` and `--slo-itl 100ms` (already parsed to ms) → one objective per TTFT bound. */
export function sloSpecs(ttftMs: readonly number[] | undefined, itlMs: number | undefined): SloSpec[] {
  const itl = itlMs ?? DEFAULT_SLOS[0].itlMs;
  return (ttftMs && ttftMs.length ? ttftMs : [DEFAULT_SLOS[0].ttftMs]).map((t) => ({ ttftMs: t, itlMs: itl }));
}
