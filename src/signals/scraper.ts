/**
 * The scraper: polls every endpoint's /metrics (and now and then /v1/models for LoRA adapters and the
 * model's max_model_len) and feeds the router. I/O lives here, never in src/routing.
 *
 * - One loop per endpoint: fetch, parse, updateSignals; the next fetch starts `interval` after the
 *   previous one started (never two in flight for one endpoint).
 * - Each fetch has a deadline shorter than the interval (a hung /metrics is cut off, counted as failed).
 * - Errors are counted (`signalsFailed`) and logged once per ok→failing change; nothing throws out.
 * - The endpoint list is re-read from the router every tick, so discovery/reload changes are followed.
 */
import { Agent, request } from 'undici';
import type { EndpointSignals } from '../routing/types.js';
import { adaptersFromModels, maxModelLenFromModels, signalsFromMetrics, type Engine } from './engines.js';

const MAX_SCRAPE_BYTES = 8 * 1024 * 1024;

export interface ScrapeTarget {
  pools(): string[];
  endpoints(pool: string): string[];
  updateSignals(endpoint: string, s: EndpointSignals, now: number): void;
  signalsFailed(endpoint: string, now: number): void;
}

export interface ScraperLogger {
  warn(obj: unknown, msg?: string): void;
  info?(obj: unknown, msg?: string): void;
  debug?(obj: unknown, msg?: string): void;
}

/** What the scraper needs to know of each pool (src/config/routing.ts maps a config onto it). */
export interface ScrapePool {
  engine: Engine;
  metrics: {
    /** the metrics page's path, e.g. /metrics */
    path: string;
    /** ms between the starts of two scrapes of one endpoint */
    interval: number;
  };
  /** sent upstream as `Authorization: Bearer …` */
  api_key?: string;
  /** scrape over HTTPS, verifying with these PEM CA certificates (the system's when none) */
  tls?: { ca?: string };
}

export interface ScraperConfig {
  pools: Record<string, ScrapePool>;
}

export interface ScraperOptions {
  /** clock in ms (default Date.now) */
  now?: () => number;
  /** how often to refresh /v1/models (adapters); 0 turns it off. Default 10 s. */
  modelsIntervalMs?: number;
  /** URL scheme for endpoints; default http */
  scheme?: 'http' | 'https';
}

interface Loop {
  endpoint: string;
  pool: string;
  timer: NodeJS.Timeout | null;
  inflight: Promise<void> | null;
  failing: boolean;
  adapters: string[] | undefined;
  maxModelLen: number | undefined;
  modelsAt: number;
}

export class Scraper {
  private readonly agent: Agent;
  /** one Agent per HTTPS pool (its CA certificates), made on first use */
  private readonly tlsAgents = new Map<string, Agent>();
  private loops = new Map<string, Loop>(); // key: endpoint (one loop even if in two pools)
  private running = false;
  private syncTimer: NodeJS.Timeout | null = null;
  private readonly now: () => number;
  private readonly modelsEvery: number;
  private readonly scheme: string;

  constructor(
    private readonly router: ScrapeTarget,
    private cfg: ScraperConfig,
    private readonly logger?: ScraperLogger,
    opts: ScraperOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.modelsEvery = opts.modelsIntervalMs ?? 10_000;
    this.scheme = opts.scheme ?? 'http';
    this.agent = new Agent({ keepAliveTimeout: 4_000, connections: 4, pipelining: 1, connect: { timeout: 2_000 } });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.sync();
    // follow endpoint list changes (discovery, reload) even when no loop is running yet
    this.syncTimer = setInterval(() => this.sync(), 1_000);
    this.syncTimer.unref?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.syncTimer) clearInterval(this.syncTimer);
    this.syncTimer = null;
    const waits: Promise<void>[] = [];
    for (const l of this.loops.values()) {
      if (l.timer) clearTimeout(l.timer);
      l.timer = null;
      if (l.inflight) waits.push(l.inflight);
    }
    this.loops.clear();
    await Promise.allSettled(waits);
    await this.agent.close().catch(() => undefined);
    await Promise.all([...this.tlsAgents.values()].map((a) => a.close().catch(() => undefined)));
  }

  /** A reloaded config: pools, intervals, paths and keys apply from each endpoint's next scrape. */
  reconfigure(cfg: ScraperConfig): void {
    this.cfg = cfg;
    this.sync();
  }

  private sync(): void {
    if (!this.running) return;
    const want = new Map<string, string>();
    for (const pool of this.router.pools()) {
      if (!this.cfg.pools[pool]) continue;
      for (const ep of this.router.endpoints(pool)) if (!want.has(ep)) want.set(ep, pool);
    }
    for (const [ep, l] of this.loops) {
      if (!want.has(ep)) {
        if (l.timer) clearTimeout(l.timer);
        this.loops.delete(ep);
      }
    }
    for (const [ep, pool] of want) {
      const have = this.loops.get(ep);
      if (have) {
        have.pool = pool;
        continue;
      }
      const l: Loop = { endpoint: ep, pool, timer: null, inflight: null, failing: false, adapters: undefined, maxModelLen: undefined, modelsAt: -Infinity };
      this.loops.set(ep, l);
      this.schedule(l, 0);
    }
  }

  private schedule(l: Loop, delay: number): void {
    if (!this.running || this.loops.get(l.endpoint) !== l) return;
    l.timer = setTimeout(() => {
      l.timer = null;
      const started = this.now();
      l.inflight = this.scrapeOnce(l)
        .catch((err) => this.logger?.warn({ err, endpoint: l.endpoint }, 'scrape loop error'))
        .finally(() => {
          l.inflight = null;
          const interval = this.interval(l);
          this.schedule(l, Math.max(0, interval - (this.now() - started)));
        });
    }, delay);
    l.timer.unref?.();
  }

  private interval(l: Loop): number {
    return Math.max(10, this.cfg.pools[l.pool]?.metrics.interval ?? 1000);
  }

  /** The dispatcher for a pool's endpoints: the shared one, or its HTTPS pool's own. */
  private agentFor(pool: string): Agent {
    const tls = this.cfg.pools[pool]?.tls;
    if (!tls) return this.agent;
    let a = this.tlsAgents.get(pool);
    if (!a) {
      a = new Agent({ keepAliveTimeout: 4_000, connections: 4, pipelining: 1, connect: { timeout: 2_000, ...(tls.ca !== undefined && { ca: tls.ca }) } });
      this.tlsAgents.set(pool, a);
    }
    return a;
  }

  private async get(url: string, timeoutMs: number, apiKey: string | undefined, dispatcher: Agent = this.agent): Promise<{ status: number; text: string }> {
    const headers: Record<string, string> = { accept: 'text/plain, application/json' };
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    const res = await request(url, {
      dispatcher,
      method: 'GET',
      headers,
      signal: AbortSignal.timeout(timeoutMs),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    // A metrics page is tens of KB; a misbehaving endpoint must not make the gateway buffer megabytes.
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > MAX_SCRAPE_BYTES) {
        res.body.destroy();
        throw new Error(`answer larger than ${MAX_SCRAPE_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return { status: res.statusCode, text: Buffer.concat(chunks, size).toString('utf8') };
  }

  /** One scrape of one endpoint; resolves always. Exposed for tests. */
  async scrapeOnce(l: Loop): Promise<void> {
    const pc = this.cfg.pools[l.pool];
    if (!pc) return;
    const interval = this.interval(l);
    // shorter than the interval, but not absurdly short for fast intervals
    const timeoutMs = Math.max(50, Math.min(interval * 0.8, 5_000));
    const base = `${pc.tls ? 'https' : this.scheme}://${l.endpoint}`;
    const agent = this.agentFor(l.pool);
    const engine = pc.engine;
    try {
      if (this.modelsEvery > 0 && this.now() - l.modelsAt >= this.modelsEvery) {
        l.modelsAt = this.now();
        try {
          const m = await this.get(`${base}/v1/models`, Math.max(timeoutMs, 500), pc.api_key, agent);
          if (m.status === 200) {
            const models: unknown = JSON.parse(m.text);
            const a = adaptersFromModels(models);
            if (a) l.adapters = a;
            l.maxModelLen = maxModelLenFromModels(models) ?? l.maxModelLen;
          }
        } catch {
          // adapters are optional; metrics decide whether the endpoint is failing
        }
      }
      const r = await this.get(base + pc.metrics.path, timeoutMs, pc.api_key, agent);
      if (r.status !== 200) throw new Error(`status ${r.status}`);
      const s = signalsFromMetrics(engine, r.text);
      if (!s) throw new Error(`no ${engine} metrics in the answer`);
      if (l.adapters) s.adapters = l.adapters;
      if (l.maxModelLen !== undefined) s.maxModelLen = l.maxModelLen;
      this.router.updateSignals(l.endpoint, s, this.now());
      if (l.failing) {
        l.failing = false;
        this.logger?.info?.({ endpoint: l.endpoint, pool: l.pool }, 'metrics scrape recovered');
      }
    } catch (err) {
      this.router.signalsFailed(l.endpoint, this.now());
      if (!l.failing) {
        l.failing = true;
        this.logger?.warn(
          { endpoint: l.endpoint, pool: l.pool, err: err instanceof Error ? err.message : String(err) },
          'metrics scrape failing (the endpoint is routed on the gateway\'s own accounting until it recovers)',
        );
      }
    }
  }
}
