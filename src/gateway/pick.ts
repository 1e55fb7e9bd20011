/**
 * The exchange's one question to the router, "which endpoint for this try?": timed into the pick-time
 * histogram, explained in the debug log, and on the first try asked of the pool's shadow policy too
 * (without dispatching or learning) to count agreement. While `admin.decisions` > 0 every pick is explained
 * (a few µs) into the gateway's ring of decisions and the prefix-match histogram.
 */
import type { PoolConfig } from '../config/schema.js';
import type { PickOptions, PickResult } from '../routing/index.js';
import type { GatewayContext } from './context.js';

/** The picker's options, one object each (none made per request, and one shape for the picker's code). */
const PICK: PickOptions = { explain: false, deferLearn: true };
const PICK_EXPLAIN: PickOptions = { explain: true, deferLearn: true };

/** What a pick is about: the routed request. */
export interface PickTarget {
  readonly requestId: string;
  readonly pool: string;
  readonly poolCfg: PoolConfig;
  /** the model name sent upstream (an alias resolved) */
  readonly forwardModel: string;
  readonly promptText: string;
  readonly promptChars: number;
  readonly promptTokens: number;
  /** tries sent so far (0 while picking the first) */
  readonly attempts: number;
  /** the endpoint that stored the answer this request continues (previous_response_id), if known */
  readonly preferEndpoint: string | undefined;
  /** what made preferEndpoint (for the debug log and /debug/decisions): a follow-up's previous_response_id by default */
  readonly pinnedBy?: 'previous_response_id' | 'response_id';
}

/**
 * One decision for `target`, never `exclude`d endpoints; `firstTry` also asks the shadow policy.
 * `requeue`: the head of a flow-control queue picked again (flow.ts): a "saturated" answer then changes
 * nothing and is neither logged nor kept in the decisions ring (it would repeat at every scrape).
 */
export function choose(ctx: GatewayContext, target: PickTarget, exclude: Set<string> | undefined, firstTry: boolean, requeue = false): PickResult {
  const { pool, poolCfg } = target;
  const debug = ctx.logger.isLevelEnabled('debug');
  const ring = ctx.decisions;
  const t0 = performance.now();
  const pick: PickResult = ctx.router.pick(
    pool,
    { model: target.forwardModel, promptText: target.promptText, promptChars: target.promptChars, promptTokens: target.promptTokens, exclude, prefer: target.preferEndpoint },
    Date.now(),
    debug || ring !== null ? PICK_EXPLAIN : PICK,
  );
  ctx.metrics.pickObserved(pool, poolCfg.policy, (performance.now() - t0) / 1000);
  if (requeue && pick.kind === 'saturated') return pick;
  if (pick.kind !== 'unavailable' && pick.explain) {
    if (debug) {
      const decision = pick.kind === 'ok' ? { endpoint: pick.endpoint, pinned_by: pick.pinned ? target.pinnedBy ?? 'previous_response_id' : undefined } : { decision: 'saturated' };
      ctx.logger.debug({ req_id: target.requestId, pool, ...decision, explain: pick.explain }, 'pick');
    }
    if (pick.kind === 'ok') {
      const total = pick.explain.totalBlocks;
      const won = pick.explain.candidates.find((c) => c.endpoint === pick.endpoint);
      if (total > 0 && won) ctx.metrics.prefixMatchObserved(pool, won.matchedBlocks / total);
    }
  }
  if (ring !== null) {
    ring.push({
      at: Date.now(),
      req_id: target.requestId,
      pool,
      model: target.forwardModel,
      outcome: pick.kind,
      endpoint: pick.kind === 'ok' ? pick.endpoint : undefined,
      pinned_by: pick.kind === 'ok' && pick.pinned ? target.pinnedBy ?? 'previous_response_id' : undefined,
      attempt: target.attempts + 1,
      explain: pick.kind === 'unavailable' ? undefined : pick.explain,
    });
  }
  const shadow = poolCfg.shadow_policy;
  if (shadow && pick.kind === 'ok' && firstTry) {
    const alt = ctx.router.pick(pool, { model: target.forwardModel, promptText: target.promptText, promptChars: target.promptChars, promptTokens: target.promptTokens }, Date.now(), { policy: shadow, dryRun: true });
    ctx.metrics.shadowPick(pool, shadow, alt.kind === 'ok' ? (alt.endpoint === pick.endpoint ? 'same' : 'different') : alt.kind);
  }
  return pick;
}
