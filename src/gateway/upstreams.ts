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

  /** `tlsOf`: whether an endpoint (HOST:PORT) is reached over HTTPS, asked once, when its Pool is made */
  constructor(
    private readonly limits: Config['limits'],
    private readonly tlsOf: (endpoint: string) => UpstreamTls | undefined = () => undefined,
  ) {}

  get(endpoint: string): Pool {
    let pool = this.pools.get(endpoint);
    if (!pool) {
      const tls = this.tlsOf(endpoint);
      pool = new Pool(`${tls ? 'https' : 'http'}://${endpoint}`, {
        pipelining: 1,
        // First byte: a long prompt's prefill must fit; then no idle limit shorter than the whole request.
        headersTimeout: this.limits.first_byte_timeout,
        bodyTimeout: this.limits.request_timeout,
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
      if (!endpoints.has(ep)) {
        this.pools.delete(ep);
        void pool.close();
      }
    }
  }

  /** Destroys every connection; requests still in flight fail with `reason`. */
  async close(reason?: Error): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => (reason ? p.destroy(reason) : p.destroy())));
  }
}
