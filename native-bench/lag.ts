/**
 * The load generator's honesty check. An open-loop generator has a schedule (request i is due at
 * scheduled[i]); if it sends late, the measured system saw less load than planned and its latencies are
 * understated, so the run is flagged invalid. Pure.
 */
import { percentileSorted, round } from './common.js';

export const DEFAULT_LAG_BOUND_P99_MS = 50;

export interface LagReport {
  samples: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  bound_p99_ms: number;
  valid: boolean;
  invalid_reason?: string;
}

/** lags: per request, actual send time − scheduled send time (ms). */
export function checkLag(lags: ArrayLike<number>, boundP99Ms = DEFAULT_LAG_BOUND_P99_MS): LagReport {
  const s = Float64Array.from(lags).sort();
  const p99 = percentileSorted(s, 0.99);
  const rep: LagReport = {
    samples: s.length,
    p50_ms: round(percentileSorted(s, 0.5)),
    p99_ms: round(p99),
    max_ms: round(s.length ? s[s.length - 1] : 0),
    bound_p99_ms: boundP99Ms,
    valid: true,
  };
  if (s.length === 0) {
    rep.valid = false;
    rep.invalid_reason = 'no request was sent';
  } else if (p99 > boundP99Ms) {
    rep.valid = false;
    rep.invalid_reason = `load generator lagged its schedule: p99 lag ${round(p99, 1)} ms > bound ${boundP99Ms} ms (the client, not the system under test, limited the run)`;
  }
  return rep;
}

/**
 * Drives an open-loop schedule: calls `send(i, lagMs)` for each i at `t0 + scheduleMs[i]` (ascending),
 * never waiting for earlier requests to finish. Requests already due are sent in one burst. Returns the
 * per-request lag. `prepare(i)` (optional) is called ahead of time for requests due within
 * `lookaheadMs`, in slices, so that costly request building is not charged as lag when the client keeps
 * up. Bounded by `deadlineMs` (requests not sent by then count as lagging until the deadline).
 */
export async function runSchedule(opts: {
  scheduleMs: ArrayLike<number>;
  send: (i: number, lagMs: number) => void;
  prepare?: (i: number) => void;
  lookaheadMs?: number;
  deadlineMs?: number;
  now?: () => number;
}): Promise<{ lags: Float64Array; t0: number; unsent: number }> {
  const now = opts.now ?? (() => performance.now());
  const n = opts.scheduleMs.length;
  const lags = new Float64Array(n);
  const lookahead = opts.lookaheadMs ?? 1000;
  const deadline = opts.deadlineMs ?? Infinity;
  const t0 = now();
  let next = 0;
  let prepared = 0;
  while (next < n) {
    let t = now() - t0;
    if (t > deadline) break;
    while (next < n && opts.scheduleMs[next] <= t) {
      const lag = t - opts.scheduleMs[next];
      lags[next] = lag;
      if (opts.prepare && prepared <= next) { opts.prepare(next); prepared = next + 1; }
      opts.send(next, lag);
      next++;
      t = now() - t0;
    }
    // Prepare ahead, a few at a time, while nothing is due.
    if (opts.prepare) {
      let budget = 8;
      while (prepared < n && budget-- > 0 && opts.scheduleMs[prepared] <= t + lookahead) {
        if (prepared >= next) opts.prepare(prepared);
        prepared++;
        if (next < n && opts.scheduleMs[next] <= now() - t0) break;
      }
    }
    if (next >= n) break;
    const wait = opts.scheduleMs[next] - (now() - t0);
    // setTimeout is coarse (≥1 ms); yield with setImmediate when the next one is due very soon.
    if (wait > 2) await new Promise((r) => setTimeout(r, Math.min(wait - 1, 50)));
    else await new Promise((r) => setImmediate(r));
  }
  let unsent = 0;
  for (let i = next; i < n; i++) {
    lags[i] = Math.max(0, deadline - opts.scheduleMs[i]);
    unsent++;
  }
  return { lags, t0, unsent };
}
