/** One keep-alive undici Pool per endpoint, created on first use and closed on shutdown or removal. */
import { Pool } from 'undici';
import type { Config } from '../config/schema.js';

/** The reason given to requests still in flight when the gateway closes its upstream connections. */
export class ShuttingDown extends Error {
  readonly code = 'INFERGATE_SHUTTING_DOWN';
  constructor() {
    super('the gateway is shutting down');
  }
}

/** How the gateway reaches an endpoint over HTTPS: the PEM CA certificates to verify it with (the system's when none). */
export interface UpstreamTls {
  ca?: string;
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  /** pools taken out of use (removed endpoint, reload) whose requests still run: destroyed on close() */
  private readonly closing = new Set<Pool>();

  /** `tlsOf`: whether an endpoint (HOST:PORT) is reached over HTTPS, asked once, when its Pool is made */
  constructor(
    private limits: Config['limits'],
    /** a retired pool closed: its last request has ended */
    private readonly onRetired: () => void = () => undefined,
    private readonly tlsOf: (endpoint: string) => UpstreamTls | undefined = () => undefined,
  ) {}

  get(endpoint: string): Pool {
    let pool = this.pools.get(endpoint);
    if (!pool) {
      const tls = this.tlsOf(endpoint);
      pool = new Pool(`${tls ? 'https' : 'http'}://${endpoint}`, {
        pipelining: 1,
        // Defaults only: every try sets its own (dispatchTry: first_byte_timeout for a stream, none for a
        // non-streamed answer, whose whole-answer deadline, response_timeout, is the exchange's timer).
        headersTimeout: this.limits.first_byte_timeout,
        bodyTimeout: this.limits.first_byte_timeout,
        // Below the model servers' own idle limit (uvicorn, under vLLM and SGLang: 5 s), so the gateway
        // drops an idle connection before the server does and never writes a request into one being closed.
        keepAliveTimeout: 4_000,
        connect: { timeout: Math.min(5_000, this.limits.first_byte_timeout), ...(tls?.ca !== undefined && { ca: tls.ca }) },
      });
      this.pools.set(endpoint, pool);
    }
    return pool;
  }

  /** Close pools of endpoints no longer configured (their in-flight requests finish first). */
  retain(endpoints: ReadonlySet<string>): void {
    for (const [ep, pool] of this.pools) {
      if (!endpoints.has(ep)) this.retire(ep, pool);
    }
  }

  /**
   * Reloaded limits: when the timeouts the pools were made with change, every pool is retired (its
   * requests finish with the old timeouts) and new requests get pools made with the new ones.
   */
  reconfigure(limits: Config['limits']): void {
    const changed = limits.first_byte_timeout !== this.limits.first_byte_timeout || limits.request_timeout !== this.limits.request_timeout;
    this.limits = limits;
    if (changed) for (const [ep, pool] of this.pools) this.retire(ep, pool);
  }

  private retire(endpoint: string, pool: Pool): void {
    this.pools.delete(endpoint);
    this.closing.add(pool);
    const closed = (): void => {
      try {
        if (this.closing.delete(pool)) this.onRetired();
      } catch {
        // a bookkeeping callback's failure must not become an unhandled rejection
      }
    };
    pool.close().then(closed, closed);
  }

  /** Destroys every connection (retired pools' too); requests still in flight fail with `reason`. */
  async close(reason?: Error): Promise<void> {
    const all = [...this.pools.values(), ...this.closing];
    this.pools.clear();
    this.closing.clear();
    await Promise.all(all.map((p) => (reason ? p.destroy(reason) : p.destroy())));
  }
}
