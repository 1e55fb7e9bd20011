/** Policies the loop can drive besides the router: the oracle (full knowledge of every engine). */
import type { Engine } from '../engine/index.js';
import type { PickContext, PickOutcome, SimPolicy } from './loop.js';

/**
 * The oracle: at each arrival, the endpoint with the lowest true time to first token for this request,
 * from each engine's whole state (Engine.estimateTtftMs: step in flight, queue, seats, KV blocks, LoRA
 * slots, cached prefix). Ties go to the endpoint with the least work, then in rotation.
 */
export function oraclePolicy(engines: readonly Engine[]): SimPolicy {
  let rot = 0;
  return {
    name: 'oracle',
    pick(ctx: PickContext): PickOutcome {
      const n = engines.length;
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

/** A plain round robin inside the simulator (for tests that must not depend on the router). */
export function localRoundRobin(engines: readonly Engine[]): SimPolicy {
  let i = 0;
  return {
    name: 'local_round_robin',
    pick(): PickOutcome {
      const e = i;
      i = (i + 1) % engines.length;
      return { kind: 'ok', endpoint: e };
    },
  };
}
