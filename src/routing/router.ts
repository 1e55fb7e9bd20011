/**
 * The router: model names → pools (aliases with weighted, optionally sticky targets) and one PoolRouter
 * per pool. Pure: no I/O, no clock, no Math.random unless none is passed in.
 */
import { hashString } from './hash.js';
import { poolOptions, type PoolOptionsInput, type RouterConfig } from './options.js';
import { PoolRouter, type PoolRouterOptions } from './pool.js';
import type { EndpointSignals, Outcome, PickInput, PickOptions, PickResult, Ticket } from './types.js';

export type RouterOptions = PoolRouterOptions;

interface Target {
  model: string;
  pool: string;
  weight: number;
}

interface Route {
  pool?: string;
  targets?: Target[];
  totalWeight: number;
}

export class Router {
  private readonly opts: RouterOptions;
  private readonly random: () => number;
  private routes = new Map<string, Route>();
  private poolMap = new Map<string, PoolRouter>();

  constructor(cfg: RouterConfig, opts: RouterOptions = {}) {
    this.opts = opts;
    this.random = opts.random ?? Math.random;
    this.reconfigure(cfg);
  }

  /**
   * A router over one pool alone (simulator, benchmarks, tests). `options` may be partial: missing keys take
   * routing's defaults (DEFAULT_POOL_OPTIONS, equal to the config file's). No model routes: call
   * pick(name, …) directly.
   */
  static fromPool(name: string, options: PoolOptionsInput, endpoints: readonly string[], opts: RouterOptions = {}): Router {
    return new Router({ models: [], pools: { [name]: poolOptions({ ...options, endpoints: [...endpoints] }) } }, opts);
  }

  /** Apply a new config: pools are kept by name with their state and index; routes replaced. */
  reconfigure(cfg: RouterConfig): void {
    const pools = new Map<string, PoolRouter>();
    for (const [name, pc] of Object.entries(cfg.pools)) {
      const old = this.poolMap.get(name);
      if (old && old.cfg.engine === pc.engine) {
        old.reconfigure(pc);
        pools.set(name, old);
      } else {
        pools.set(name, new PoolRouter(name, pc, pc.endpoints, this.opts));
      }
    }
    this.poolMap = pools;
    const byName = new Map(cfg.models.map((m) => [m.name, m]));
    const routes = new Map<string, Route>();
    for (const m of cfg.models) {
      if (m.pool !== undefined) {
        routes.set(m.name, { pool: m.pool, totalWeight: 0 });
      } else if (m.targets) {
        const targets: Target[] = [];
        let total = 0;
        for (const t of m.targets) {
          const pool = byName.get(t.model)?.pool;
          if (pool === undefined || t.weight <= 0) continue;
          targets.push({ model: t.model, pool, weight: t.weight });
          total += t.weight;
        }
        if (targets.length) routes.set(m.name, { targets, totalWeight: total });
      }
    }
    this.routes = routes;
  }

  /**
   * Client model name → pool and the model name to forward. Aliases pick a target by weight: with a
   * sticky key by its hash (the same key always gets the same target), else at random.
   */
  resolveModel(name: string, stickyKey?: string): { pool: string; model: string } | null {
    const r = this.routes.get(name);
    if (!r) return null;
    if (r.pool !== undefined) return this.poolMap.has(r.pool) ? { pool: r.pool, model: name } : null;
    const targets = r.targets!;
    const u = stickyKey !== undefined && stickyKey !== '' ? hashString(stickyKey) / 4294967296 : this.random();
    let x = u * r.totalWeight;
    for (const t of targets) {
      x -= t.weight;
      if (x < 0) return { pool: t.pool, model: t.model };
    }
    const last = targets[targets.length - 1];
    return { pool: last.pool, model: last.model };
  }

  models(): string[] {
    return [...this.routes.keys()];
  }

  /**
   * The longest context a client model name takes, in tokens, as its pool's servers report it (the least
   * over an alias's targets, since a request may reach any of them); undefined when not known.
   */
  maxModelLen(name: string): number | undefined {
    const r = this.routes.get(name);
    if (!r) return undefined;
    const pools = r.pool !== undefined ? [r.pool] : r.targets!.map((t) => t.pool);
    let least: number | undefined;
    for (const pool of pools) {
      const n = this.poolMap.get(pool)?.maxModelLen();
      if (n === undefined) return undefined; // a target whose length is unknown: no figure is safe
      if (least === undefined || n < least) least = n;
    }
    return least;
  }

  pools(): string[] {
    return [...this.poolMap.keys()];
  }

  endpoints(pool: string): string[] {
    return this.poolMap.get(pool)?.endpoints() ?? [];
  }

  /** The pool's picker itself (simulator, benchmarks, tests). */
  pool(name: string): PoolRouter | undefined {
    return this.poolMap.get(name);
  }

  pick(pool: string, input: PickInput, now: number, opts?: PickOptions): PickResult {
    const p = this.poolMap.get(pool);
    if (!p) return { kind: 'unavailable' };
    return p.pick(input, now, opts);
  }

  /** Learn a pick made with `deferLearn` into its pool's prefix index (no-op otherwise, or if done already). */
  learn(t: Ticket): void {
    (t as { owner?: PoolRouter | null }).owner?.learn(t);
  }

  /** What a replica learned (PoolRouter.learnRemote), applied to the named pool. */
  learnRemote(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number, now: number): void {
    this.poolMap.get(pool)?.learnRemote(endpoint, chain, totalBlocks, now);
  }

  /** What the other replicas have in flight on an endpoint of the named pool (PoolRouter.setRemoteInFlight). */
  setRemoteInFlight(pool: string, endpoint: string, n: number): void {
    this.poolMap.get(pool)?.setRemoteInFlight(endpoint, n);
  }

  onFirstByte(t: Ticket, now: number): void {
    (t as { owner?: PoolRouter | null }).owner?.onFirstByte(t, now);
  }

  onEnd(t: Ticket, now: number, outcome: Outcome): void {
    (t as { owner?: PoolRouter | null }).owner?.onEnd(t, now, outcome);
  }

  /** Signals for an endpoint (host:port); applied in every pool that lists it. */
  updateSignals(endpoint: string, s: EndpointSignals, now: number): void {
    for (const p of this.poolMap.values()) p.updateSignals(endpoint, s, now);
  }

  signalsFailed(endpoint: string, now: number): void {
    for (const p of this.poolMap.values()) p.signalsFailed(endpoint, now);
  }

  setEndpoints(pool: string, endpoints: string[]): void {
    this.poolMap.get(pool)?.setEndpoints(endpoints);
  }

  indexStats(pool?: string): { blocks: number; approxBytes: number } {
    let blocks = 0;
    let approxBytes = 0;
    for (const [name, p] of this.poolMap) {
      if (pool !== undefined && name !== pool) continue;
      const s = p.index.stats();
      blocks += s.blocks;
      approxBytes += s.approxBytes;
    }
    return { blocks, approxBytes };
  }

  debugPools(now: number): unknown {
    const out: Record<string, unknown> = {};
    for (const [name, p] of this.poolMap) out[name] = p.debug(now);
    return out;
  }
}
