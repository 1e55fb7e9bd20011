/**
 * `GET /debug/state`: everything the status page shows, in one JSON answer — the gateway's own state
 * (draining, requests in flight, readiness), each pool's endpoints with their last signals and age,
 * in-flight work, ejections and saturation, and the last routing decisions.
 */
import type { DebugEndpoint } from '../../routing/index.js';
import { decisionJson, type DecisionRing } from '../decisions.js';
import type { Readiness } from '../readiness.js';
import { notLiveReason } from '../readiness.js';

export interface StateSource {
  readonly startedAt: number;
  readonly draining: boolean;
  readonly inFlight: number;
  readonly decisions: DecisionRing | null;
  poolViews(now: number): Map<string, DebugEndpoint[]>;
  readiness(now: number, views?: ReadonlyMap<string, readonly DebugEndpoint[]>): Readiness;
  policyOf(pool: string): string;
  staleAfterMs(pool: string): number;
}

/** How many decisions the state carries (the page shows these; /debug/decisions has the rest). */
export const STATE_DECISIONS = 20;

export function gatewayState(src: StateSource, now: number): Record<string, unknown> {
  const views = src.poolViews(now);
  const ready = src.readiness(now, views);
  const pools = [...views].map(([pool, eps]) => ({
    pool,
    policy: src.policyOf(pool),
    stale_after_ms: src.staleAfterMs(pool),
    saturated: eps.length > 0 && eps.every((e) => e.saturated),
    in_flight: eps.reduce((a, e) => a + e.in_flight, 0),
    endpoints: eps.map((e) => ({
      endpoint: e.endpoint,
      state: e.ejected_for_ms ? 'ejected' : e.signals === null ? 'unknown' : e.stale ? 'stale' : 'live',
      not_live: notLiveReason(e) ?? null,
      age_ms: e.age_ms,
      waiting: e.signals?.waiting ?? null,
      running: e.signals?.running ?? null,
      kv_cache: e.signals?.kvUsage ?? null,
      in_flight: e.in_flight,
      pending: e.pending,
      waiting_estimate: e.waiting_estimate,
      saturated: e.saturated,
      eligible: e.eligible,
      why_not: e.why_not ?? null,
      ejected_for_ms: e.ejected_for_ms ?? null,
      scrape_failures: e.scrape_failures,
      index_blocks: e.index_blocks,
    })),
  }));
  return {
    time: new Date(now).toISOString(),
    uptime_s: Math.round((now - src.startedAt) / 1000),
    draining: src.draining,
    in_flight: src.inFlight,
    ready: src.draining ? false : ready.ready,
    ready_when: ready.ready_when,
    models: ready.models,
    pools,
    decisions: (src.decisions?.last(STATE_DECISIONS) ?? []).map(decisionJson),
  };
}
