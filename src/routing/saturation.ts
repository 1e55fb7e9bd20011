/**
 * Saturation (every policy): an endpoint is saturated when its waiting estimate reaches queue_depth or its
 * fresh KV-cache use reaches kv_cache (0 turns either test off). With every candidate saturated the pick
 * answers "saturated" with a Retry-After.
 */
import type { CandidateTable } from './candidates.js';
import type { SaturationOptions } from './options.js';

export function isSaturated(waiting: number, fresh: boolean, kv: number, queueDepth: number, kvCache: number): boolean {
  return (queueDepth > 0 && waiting >= queueDepth) || (kvCache > 0 && fresh && kv >= kvCache);
}

/** Seconds until the least-saturated endpoint has likely drained below the thresholds (1..60). */
export function retryAfterS(t: CandidateTable, sat: SaturationOptions): number {
  const ra = sat.retry_after;
  if (ra !== 'auto') return Math.max(1, Math.ceil(ra / 1000));
  const qd = sat.queue_depth;
  let best = Infinity;
  for (let i = 0; i < t.n; i++) {
    const excess = qd > 0 ? Math.max(0, t.waitingAt(i) - qd + 1) : 0;
    // no drain measurement yet: assume one request per second
    const drainRate = t.st[i].drainRate;
    const rate = drainRate > 0 ? drainRate : 1;
    const s = excess > 0 ? excess / rate : 1; // kv-saturated only: a second, then look again
    if (s < best) best = s;
  }
  if (!Number.isFinite(best)) best = 1;
  return Math.max(1, Math.min(60, Math.ceil(best)));
}
