/**
 * Policies the loop can drive besides the router, both with full knowledge of every engine (no real router
 * has it): yardsticks, not candidates.
 * - `oracle`: for each arrival, the exact time to first token every endpoint would give the request
 *   (Engine.predictTtftMs: a copy of its state run forward, ignoring later arrivals); the lowest wins.
 * - `greedy_estimate` (the earlier oracle): the same choice on Engine.estimateTtftMs, an O(queue) estimate.
 */
import type { Engine } from '../engine/index.js';
import type { PickContext, PickOutcome, SimPolicy } from './loop.js';

export interface OracleAdmission {
  /** the pool's saturation.queue_depth (0: off) */
  queueDepth: number;
  /** the pool's saturation.kv_cache (0: off) */
  kvCache: number;
}

/** Every endpoint over the pool's saturation thresholds, read from the true state (what the gateway sheds on). */
function allSaturated(engines: readonly Engine[], admission: OracleAdmission | undefined): boolean {
  if (!admission || (admission.queueDepth <= 0 && admission.kvCache <= 0)) return false;
  for (const e of engines) {
    const s = e.snapshot();
    const sat = (admission.queueDepth > 0 && s.waiting >= admission.queueDepth) || (admission.kvCache > 0 && s.kvUsage >= admission.kvCache);
    if (!sat) return false;
  }
  return true;
}

function load(e: Engine): number {
  const s = e.snapshot();
  return s.running + s.waiting;
}

/**
 * The greedy estimate (the simulator's oracle before the exact one): at each arrival, the endpoint with
 * the lowest Engine.estimateTtftMs (step in flight, queue, seats, KV blocks, LoRA slots, cached prefix).
 * Ties go to the endpoint with the least work, then in rotation. With `admission` it sheds like the gateway
 * (every endpoint saturated → 429) but on the true state.
 */
export function greedyEstimatePolicy(engines: readonly Engine[], admission?: OracleAdmission): SimPolicy {
  let rot = 0;
  return {
    name: 'greedy_estimate',
    pick(ctx: PickContext): PickOutcome {
      const n = engines.length;
      if (allSaturated(engines, admission)) return { kind: 'saturated' };
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

/**
 * The exact oracle: each endpoint's true TTFT for this request (its state run forward with the request
 * added, as if nothing arrived after it), the lowest wins; ties go to the least work, then in rotation.
 * Endpoints are tried in the order of their estimate and each forward run stops once it is slower than the
 * best so far, so most runs are short. It sheds only when every endpoint is over the pool's saturation
 * thresholds (true state, as `admission`) **and** none could give a first token within `deadlineMs` (the
 * headline SLO's TTFT bound): it never refuses a request that some endpoint could serve in time.
 */
export function oraclePolicy(engines: readonly Engine[], admission?: OracleAdmission, deadlineMs = 2000): SimPolicy {
  let rot = 0;
  const n = engines.length;
  const order: number[] = [];
  const est = new Float64Array(n);
  return {
    name: 'oracle',
    pick(ctx: PickContext): PickOutcome {
      const saturated = allSaturated(engines, admission);
      order.length = 0;
      for (let k = 0; k < n; k++) {
        const e = (rot + k) % n;
        order.push(e);
        est[e] = engines[e].estimateTtftMs(ctx.tokens, ctx.req.lora, ctx.now);
      }
      rot = (rot + 1) % n;
      order.sort((a, b) => est[a] - est[b]); // stable: rotation order among equal estimates
      let best = -1;
      let bestT = saturated ? deadlineMs : Infinity;
      let bestLoad = Infinity;
      let bestPos = Infinity;
      for (let k = 0; k < n; k++) {
        const e = order[k];
        const t = engines[e].predictTtftMs(ctx.tokens, ctx.req.lora, ctx.now, bestT);
        if (t === Infinity) continue;
        const l = load(engines[e]);
        const pos = (e - rot + 1 + n) % n; // its place in this arrival's rotation
        if (t < bestT || best < 0 || l < bestLoad || (l === bestLoad && pos < bestPos)) {
          best = e;
          bestT = t;
          bestLoad = l;
          bestPos = pos;
        }
      }
      // no endpoint in time under saturation: shed; none can take it at all: the first answers the 400
      if (best < 0) return saturated ? { kind: 'saturated' } : n > 0 ? { kind: 'ok', endpoint: order[0] } : { kind: 'unavailable' };
      return { kind: 'ok', endpoint: best };
    },
  };
}
