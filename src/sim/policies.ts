/** Policies the loop can drive besides the router: the oracle (full knowledge of every engine). */
import type { Engine } from '../engine/index.js';
import type { PickContext, PickOutcome, SimPolicy } from './loop.js';

/**
 * The oracle: at each arrival, the endpoint with the lowest true time to first token for this request,
 * from each engine's whole state (Engine.estimateTtftMs: step in flight, queue, seats, KV blocks, LoRA
 * slots, cached prefix). Ties go to the endpoint with the least work, then in rotation.
 */
export interface OracleAdmission {
  /** the pool's saturation.queue_depth (0: off) */
  queueDepth: number;
  /** the pool's saturation.kv_cache (0: off) */
  kvCache: number;
}

/**
 * With `admission`, the oracle sheds load like the gateway does (every endpoint saturated → 429) but on
 * the true state, so that under overload it is compared with policies that reject at the same thresholds
 * rather than queueing everything (which no real deployment with saturation on would do).
 */
export function oraclePolicy(engines: readonly Engine[], admission?: OracleAdmission): SimPolicy {
  let rot = 0;
  return {
    name: 'oracle',
    pick(ctx: PickContext): PickOutcome {
      const n = engines.length;
      if (admission && (admission.queueDepth > 0 || admission.kvCache > 0)) {
        let all = true;
        for (let e = 0; e < n && all; e++) {
          const s = engines[e].snapshot();
          const sat = (admission.queueDepth > 0 && s.waiting >= admission.queueDepth) || (admission.kvCache > 0 && s.kvUsage >= admission.kvCache);
          if (!sat) all = false;
        }
        if (all) return { kind: 'saturated' };
      }
      let best = -1;
      let bestT = Infinity;
      let bestLoad = Infinity;
      for (let k = 0; k < n; k++) {
        const e = (rot + k) % n;
        const t = engines[e].estimateTtftMs(ctx.tokens, ctx.req.lora, ctx.now);
        if (t < bestT || (t === bestT && load(engines[e]) < bestLoad)) {
          best = e;
          bestT = t;
          bestLoad = load(engines[e]);
        }
      }
      rot = (rot + 1) % n;
      return best < 0 ? { kind: 'unavailable' } : { kind: 'ok', endpoint: best };
    },
  };
}

function load(e: Engine): number {
  const s = e.snapshot();
  return s.running + s.waiting;
}
