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

/** Several gateway replicas behind a client-side spread, each with its own router (index, accounting). */
export interface ReplicaOptions {
  /** how many gateway replicas (1: one router, as without this option) */
  replicas: number;
  /** `none`: each learns only from its own picks; `events`: every learned pick reaches the others */
  share: 'none' | 'events';
  /** virtual ms between a replica's pick and the others applying it (share: events) */
  shareDelayMs: number;
  /** how clients' requests are spread over the replicas (an L4 balancer): in turn, or at random */
  spread: 'round_robin' | 'random';
}

export const SINGLE_REPLICA: ReplicaOptions = { replicas: 1, share: 'none', shareDelayMs: 0, spread: 'round_robin' };

interface Shared {
  at: number;
  from: number;
  endpoint: string;
  chain: Uint32Array;
}

export function routerPolicy(
  setup: SimSetup,
  policy: PolicyName,
  seed: number,
  profile: Partial<EngineProfile>,
  rep: ReplicaOptions = SINGLE_REPLICA,
): (engines: readonly Engine[]) => SimPolicy {
  return (engines) => {
    const n = Math.max(1, rep.replicas);
    // What replicas learned, in the order they learned it, waiting for its delivery time (share: events).
    // Applied lazily, before any replica picks at or after that time: the same index state as delivering
    // each at its exact moment, since only picks read the index.
    const inTransit: Shared[] = [];
    let head = 0;
    const routers: Router[] = [];
    for (let r = 0; r < n; r++) {
      const onLearn =
        n > 1 && rep.share === 'events'
          ? (_pool: string, endpoint: string, chain: ArrayLike<number>, total: number, now: number) => {
              inTransit.push({ at: now + rep.shareDelayMs, from: r, endpoint, chain: Uint32Array.from({ length: Math.min(total, chain.length) }, (_, k) => chain[k]) });
            }
          : undefined;
      // replica 0 draws from the run's seed, as a single router does: one replica is the plain run
      routers.push(new Router(setup.router, { random: mulberry32(seed + r * 7919), onLearn }));
    }
    const deliver = (now: number): void => {
      while (head < inTransit.length && inTransit[head].at <= now) {
        const m = inTransit[head++];
        for (let r = 0; r < n; r++) if (r !== m.from) routers[r].learnRemote(SIM_POOL, m.endpoint, m.chain, m.chain.length, m.at);
      }
      if (head > 1024 && head * 2 > inTransit.length) {
        inTransit.splice(0, head);
        head = 0;
      }
    };
    const spreadRandom = mulberry32(seed ^ 0x5eed);
    let turn = 0;
    const names = engines.map((_, i) => endpointName(i));
    const index = new Map(names.map((nm, i) => [nm, i]));
    const { block_chars: blockChars, max_blocks: maxBlocks } = setup.pool.prefix;
    return {
      name: policy,
      pick(ctx: PickContext): PickOutcome {
        const { req } = ctx;
        const model = req.model ?? SIM_MODEL;
        if (inTransit.length > head) deliver(ctx.now);
        const router = n === 1 ? routers[0] : routers[rep.spread === 'random' ? Math.floor(spreadRandom() * n) : turn++ % n];
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
      // a ticket knows the replica's pool router that issued it: any router passes it on
      onFirstByte(ticket, now) {
        if (ticket) routers[0].onFirstByte(ticket as Ticket, now);
      },
      onEnd(ticket, now, ok) {
        if (ticket) routers[0].onEnd(ticket as Ticket, now, ok ? 'ok' : 'error');
      },
      onScrape(i, snap, now) {
        // every replica scrapes every endpoint (each keeps its own signals)
        const sig = signalsOf(snap, profile);
        for (const router of routers) router.updateSignals(names[i], sig, now);
      },
    };
  };
}
