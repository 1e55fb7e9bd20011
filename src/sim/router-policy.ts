/**
 * The gateway's own picker (src/routing, unchanged) as a simulator policy: one Router per run, built from
 * the simulator's setup, whose single pool lists the simulated endpoints; scrapes become Router.updateSignals, first
 * tokens Router.onFirstByte, ends Router.onEnd — the same calls, at the same (virtual) moments, as the
 * live gateway makes.
 */
import type { Engine, EngineProfile, EngineSnapshot } from '../engine/index.js';
import { estimateTokens } from '../openai/tokens.js';
import { Router } from '../routing/index.js';
import type { EndpointSignals, PolicyName, Ticket } from '../routing/index.js';
import type { PickContext, PickOutcome, SimPolicy } from './loop.js';
import { mulberry32 } from './rng.js';
import { tracePrefixBlocks } from './trace.js';
import { SIM_MODEL, SIM_POOL, type SimSetup } from './config.js';

export function endpointName(i: number): string {
  return `sim-${i}:8000`;
}

export function signalsOf(s: EngineSnapshot, profile: Partial<EngineProfile>): EndpointSignals {
  return {
    waiting: s.waiting,
    running: s.running,
    kvUsage: s.kvUsage,
    loraRunning: s.loraRunning,
    loraWaiting: s.loraWaiting,
    maxLoras: s.maxLoras,
    blockSize: s.blockSize,
    numGpuBlocks: s.numGpuBlocks,
    adapters: profile.loras ?? [],
  };
}

export function routerPolicy(
  setup: SimSetup,
  policy: PolicyName,
  seed: number,
  profile: Partial<EngineProfile>,
): (engines: readonly Engine[]) => SimPolicy {
  return (engines) => {
    const router = new Router(setup.router, { random: mulberry32(seed) });
    const names = engines.map((_, i) => endpointName(i));
    const index = new Map(names.map((n, i) => [n, i]));
    const { block_chars: blockChars, max_blocks: maxBlocks } = setup.pool.prefix;
    return {
      name: policy,
      pick(ctx: PickContext): PickOutcome {
        const { req } = ctx;
        const model = req.model ?? SIM_MODEL;
        const r = router.pick(
          SIM_POOL,
          req.prompt !== undefined
            ? { model, promptText: req.prompt, promptTokens: estimateTokens(req.prompt) }
            : {
                model,
                promptText: '',
                promptTokens: req.inputTokens,
                prefixBlocks: tracePrefixBlocks(req.hashIds, req.inputTokens, blockChars, maxBlocks, model),
              },
          ctx.now,
          { policy },
        );
        if (r.kind !== 'ok') return r;
        const e = index.get(r.endpoint);
        if (e === undefined) throw new Error(`router picked an unknown endpoint ${r.endpoint}`);
        return { kind: 'ok', endpoint: e, ticket: r.ticket };
      },
      onFirstByte(ticket, now) {
        if (ticket) router.onFirstByte(ticket as Ticket, now);
      },
      onEnd(ticket, now, ok) {
        if (ticket) router.onEnd(ticket as Ticket, now, ok ? 'ok' : 'error');
      },
      onScrape(i, snap, now) {
        router.updateSignals(names[i], signalsOf(snap, profile), now);
      },
    };
  };
}
