/**
 * The gateway's own picker (src/routing, unchanged) as a simulator policy: one Router per run, built from
 * the simulator's setup, whose single pool lists the simulated endpoints; scrapes become Router.updateSignals, first
 * tokens Router.onFirstByte, ends Router.onEnd — the same calls, at the same (virtual) moments, as the
 * live gateway makes.
 */
import type { Engine, EngineProfile, EngineSnapshot } from '../engine/index.js';
import { DEFAULT_PROFILE } from '../engine/index.js';
import { estimateTokens } from '../openai/tokens.js';
import { Router } from '../routing/index.js';
import type { EndpointSignals, PolicyName, PoolRouter, Ticket } from '../routing/index.js';
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
    maxModelLen: profile.maxModelLen ?? DEFAULT_PROFILE.maxModelLen,
  };
}

/** Several gateway replicas behind a client-side spread, each with its own router (index, accounting). */
export interface ReplicaOptions {
  /** how many gateway replicas (1: one router, as without this option) */
  replicas: number;
  /**
   * `none`: each learns only from its own picks; `events`: every learned pick reaches the others;
   * `events+inflight`: that, and each replica's in-flight count per endpoint too (the load scorer adds the
   * others' counts to its own)
   */
  share: ReplicaShare;
  /** virtual ms between a replica's pick (or a change of its in-flight count) and the others applying it */
  shareDelayMs: number;
  /**
   * share events+inflight: in-flight counts go out at the end of each period of this many virtual ms (0: at
   * every change), then take shareDelayMs to arrive
   */
  inflightPeriodMs?: number;
  /** how clients' requests are spread over the replicas (an L4 balancer): in turn, or at random */
  spread: 'round_robin' | 'random';
}

export const REPLICA_SHARES = ['none', 'events', 'events+inflight'] as const;
export type ReplicaShare = (typeof REPLICA_SHARES)[number];

export const SINGLE_REPLICA: ReplicaOptions = { replicas: 1, share: 'none', shareDelayMs: 0, spread: 'round_robin' };

interface Shared {
  at: number;
  from: number;
  endpoint: string;
  chain: Uint32Array;
}

/** A change of one replica's in-flight count on one endpoint, and when the others see it. */
interface LoadChange {
  at: number;
  from: number;
  endpoint: number;
  delta: number;
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
        n > 1 && rep.share !== 'none'
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
    // share events+inflight: each replica's in-flight changes, in the order they become visible (a change
    // is seen at the end of its period, plus the delay: the order of the changes), and what every replica
    // knows of the others' counts (remote[r][e]: the sum over the other replicas)
    const shareLoad = n > 1 && rep.share === 'events+inflight';
    const period = Math.max(0, rep.inflightPeriodMs ?? 0);
    const loadQ: LoadChange[] = [];
    let loadHead = 0;
    const remote = routers.map(() => new Float64Array(engines.length));
    const replicaOf = new Map<PoolRouter | undefined, number>(routers.map((rt, r) => [rt.pool(SIM_POOL), r]));
    const loadChanged = (ticket: Ticket, e: number, delta: number, now: number): void => {
      const from = replicaOf.get((ticket as { owner?: PoolRouter }).owner);
      if (from === undefined) return;
      const sent = period > 0 ? Math.ceil(now / period) * period : now;
      loadQ.push({ at: sent + rep.shareDelayMs, from, endpoint: e, delta });
    };
    const deliverLoad = (now: number): void => {
      while (loadHead < loadQ.length && loadQ[loadHead].at <= now) {
        const m = loadQ[loadHead++];
        for (let r = 0; r < n; r++) {
          if (r === m.from) continue;
          remote[r][m.endpoint] += m.delta;
          routers[r].setRemoteInFlight(SIM_POOL, names[m.endpoint], remote[r][m.endpoint]);
        }
      }
      if (loadHead > 1024 && loadHead * 2 > loadQ.length) {
        loadQ.splice(0, loadHead);
        loadHead = 0;
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
        if (loadQ.length > loadHead) deliverLoad(ctx.now);
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
        if (shareLoad) loadChanged(r.ticket, e, 1, ctx.now);
        return { kind: 'ok', endpoint: e, ticket: r.ticket };
      },
      // a ticket knows the replica's pool router that issued it: any router passes it on
      onFirstByte(ticket, now) {
        if (ticket) routers[0].onFirstByte(ticket as Ticket, now);
      },
      onEnd(ticket, now, ok) {
        if (!ticket) return;
        routers[0].onEnd(ticket as Ticket, now, ok ? 'ok' : 'error');
        if (shareLoad) {
          const e = index.get((ticket as Ticket).endpoint);
          if (e !== undefined) loadChanged(ticket as Ticket, e, -1, now);
        }
      },
      onScrape(i, snap, now) {
        // every replica scrapes every endpoint (each keeps its own signals)
        const sig = signalsOf(snap, profile);
        for (const router of routers) router.updateSignals(names[i], sig, now);
      },
    };
  };
}
