/**
 * The yardstick over *offered* requests (shared/spec/README.md, "Result JSON"): what share was shed, how
 * many requests met a latency objective (SLO attainment) and at what rate (goodput), and TTFT percentiles
 * in which a rejected or failed request counts as infinitely slow. Latency percentiles over completed
 * requests alone flatter a policy that rejects more; these do not. Pure: the simulator's run statistics and
 * the live benchmark feed it the same per-request facts.
 */
import { round } from './stats.js';

/**
 * One latency objective: a request meets it when it completed with TTFT ≤ ttftMs and mean ITL ≤ itlMs.
 * `headline`: the one objective that the printed table, the report's verdict, `--targets`, `--tune` and the
 * oracle's shedding deadline use (see `headlineOf`).
 */
export interface SloSpec {
  ttftMs: number;
  itlMs: number;
  headline?: boolean;
}

/** The TTFT bounds used when none are given (issue #17: 1 s, 2 s, 5 s), each with a 100 ms mean ITL bound. */
export const DEFAULT_SLO_TTFT_MS: readonly number[] = [1000, 2000, 5000];
export const DEFAULT_SLO_ITL_MS = 100;
/**
 * The headline among the default bounds: 2 s. A cold prefill of the Mooncake trace's median prompt takes
 * about 0.7 s and its long prompts several seconds, so 1 s mostly rewards affinity on long prompts alone,
 * and 5 s is met by every policy until deep overload (src/sim/README.md, "Tuning").
 */
export const DEFAULT_HEADLINE_TTFT_MS = 2000;

/** The objectives used when none are given. */
export const DEFAULT_SLOS: readonly SloSpec[] = DEFAULT_SLO_TTFT_MS.map((t) => ({
  ttftMs: t,
  itlMs: DEFAULT_SLO_ITL_MS,
  ...(t === DEFAULT_HEADLINE_TTFT_MS ? { headline: true } : {}),
}));

/** The headline objective of a list (specs or a result's `slo[]`): the one marked so, else the first. */
export function headlineOf<T extends { headline?: boolean }>(list: readonly T[] | undefined): T | undefined {
  return list?.find((s) => s.headline === true) ?? list?.[0];
}

export interface SloFigure {
  ttft_ms: number;
  itl_ms: number;
  /** share of offered requests that completed within both bounds */
  attainment: number;
  /** those requests per second of the run */
  goodput_rps: number;
  /** present (true) on the headline objective only */
  headline?: boolean;
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
      ...(s.headline ? { headline: true } : {}),
    };
  });
  return {
    shed_share: round(n > 0 ? rejected / n : 0, 4),
    slo,
    ttft_offered_ms: { p50: pct(0.5), p90: pct(0.9), p99: pct(0.99) },
  };
}

/**
 * `--slo-ttft 1s,2s,5s`, `--slo-itl 100ms` and `--slo-headline 2s` (already parsed to ms) → one objective
 * per TTFT bound, in the order given, one of them the headline: `headlineMs` (which must be one of the
 * bounds), else the first bound given, else (no bounds given: 1 s, 2 s, 5 s) 2 s.
 */
export function sloSpecs(ttftMs: readonly number[] | undefined, itlMs: number | undefined, headlineMs?: number): SloSpec[] {
  const itl = itlMs ?? DEFAULT_SLO_ITL_MS;
  const given = ttftMs !== undefined && ttftMs.length > 0;
  const bounds = given ? [...ttftMs] : [...DEFAULT_SLO_TTFT_MS];
  const head = headlineMs ?? (given ? bounds[0] : DEFAULT_HEADLINE_TTFT_MS);
  const at = bounds.indexOf(head);
  if (at < 0) throw new Error(`--slo-headline ${head}ms is not one of the --slo-ttft bounds (${bounds.map((b) => `${b}ms`).join(', ')})`);
  return bounds.map((t, i) => ({ ttftMs: t, itlMs: itl, ...(i === at ? { headline: true } : {}) }));
}
