/**
 * /readyz's judgement, from the router's view of the endpoints: a model is ready when every pool it can be
 * routed to (its own, or each target's of an alias) has at least one live endpoint — metrics scraped within
 * the pool's `stale_after` and not ejected after errors. Saturation does not count against readiness: a
 * loaded pool answers 429 with Retry-After, and taking the gateway out of a load balancer then would only
 * move the load. `admin.ready_when` says whether every model (all) or one (any) must be ready.
 */
import type { Config } from '../config/schema.js';
import type { DebugEndpoint, Router } from '../routing/index.js';

export interface MissingPool {
  pool: string;
  /** set when the pool has no endpoints at all (discovery found none) */
  why?: string;
  /** each endpoint of the pool and why it does not count (empty: the pool has no endpoints) */
  endpoints: Array<{ endpoint: string; why: string }>;
}

export interface ModelReadiness {
  model: string;
  ready: boolean;
  /** the pools that keep it from being ready */
  missing?: MissingPool[];
}

export interface Readiness {
  ready: boolean;
  ready_when: 'all' | 'any';
  models: ModelReadiness[];
}

/** Why an endpoint does not count for readiness, or undefined when it is live. */
export function notLiveReason(e: Pick<DebugEndpoint, 'signals' | 'stale' | 'ejected_for_ms'>): string | undefined {
  if (e.ejected_for_ms !== undefined && e.ejected_for_ms > 0) return 'ejected after errors';
  if (e.signals === null) return 'metrics never scraped';
  if (e.stale) return 'metrics stale';
  return undefined;
}

export function readiness(
  router: Router,
  models: Config['models'],
  readyWhen: 'all' | 'any',
  now: number,
  poolViews?: ReadonlyMap<string, readonly DebugEndpoint[]>,
): Readiness {
  const poolOf = new Map<string, string>();
  for (const m of models) if (m.pool !== undefined) poolOf.set(m.name, m.pool);
  const missingByPool = new Map<string, MissingPool | null>();
  const poolMissing = (pool: string): MissingPool | null => {
    let r = missingByPool.get(pool);
    if (r !== undefined) return r;
    const eps = poolViews?.get(pool) ?? router.pool(pool)?.debug(now).endpoints ?? [];
    const out: MissingPool = { pool, endpoints: [] };
    let live = 0;
    for (const e of eps) {
      const why = notLiveReason(e);
      if (why === undefined) live++;
      else out.endpoints.push({ endpoint: e.endpoint, why });
    }
    if (eps.length === 0) out.why = 'no endpoints';
    r = live > 0 ? null : out;
    missingByPool.set(pool, r);
    return r;
  };
  const result: ModelReadiness[] = [];
  for (const m of models) {
    const pools = m.pool !== undefined ? [m.pool] : [...new Set((m.targets ?? []).flatMap((t) => poolOf.get(t.model) ?? []))];
    const missing = pools.map(poolMissing).filter((x): x is MissingPool => x !== null);
    result.push(missing.length > 0 || pools.length === 0 ? { model: m.name, ready: false, missing } : { model: m.name, ready: true });
  }
  const ready = readyWhen === 'all' ? result.every((m) => m.ready) : result.some((m) => m.ready);
  return { ready, ready_when: readyWhen, models: result };
}
