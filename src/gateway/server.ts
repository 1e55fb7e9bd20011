/**
 * The live gateway: the client listener and its routes, the admin listener (admin.ts), DNS discovery,
 * the metric scraper, and shutdown. The listeners are fronts (uws-front.ts); a request's handling is an
 * Exchange (exchange.ts).
 */
import type { Config } from '../config/schema.js';
import { routerConfig, scraperConfig } from '../config/routing.js';
import type { Logger } from '../observability/logger.js';
import { GatewayMetrics } from '../observability/metrics.js';
import { Router } from '../routing/index.js';
import { Scraper } from '../signals/scraper.js';
import type { GatewayContext } from './context.js';
import { errors } from '../openai/errors.js';
import { adminRoutes } from './admin.js';
import { errorAnswer, jsonAnswer } from './answers.js';
import type { Answer } from './client.js';
import { Discovery } from './discovery.js';
import { Exchange } from './exchange.js';
import { Upstreams } from './upstreams.js';
import { Front } from './uws-front.js';
import { uwsInUse } from '../common/uws.js';

export interface GatewayAddresses {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
}

export class Gateway implements GatewayContext {
  readonly router: Router;
  readonly upstreams: Upstreams;
  readonly metrics: GatewayMetrics;
  readonly stickyHeaders: ReadonlySet<string>;
  draining = false;
  inFlight = 0;
  private scraper: Scraper | undefined;
  private discovery: Discovery | undefined;
  private front: Front | undefined;
  private adminFront: Front | undefined;
  private drainWaiter: (() => void) | undefined;

  constructor(
    readonly config: Config,
    readonly logger: Logger,
  ) {
    this.router = new Router(routerConfig(config));
    this.upstreams = new Upstreams(config.limits);
    this.metrics = new GatewayMetrics({
      endpointStates: () => this.endpointStates(),
      bufferedBodyBytes: () => this.front?.bodyBudget.inUse ?? 0,
      uwsVersion: () => uwsInUse()?.version,
    });
    this.stickyHeaders = new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : [])));
  }

  onExchangeDone(): void {
    if (this.draining && this.inFlight === 0) this.drainWaiter?.();
  }

  async start(): Promise<GatewayAddresses> {
    const { listen, admin, limits } = this.config;
    const onHandlerError = (err: unknown): Answer => {
      this.logger.error({ err }, 'request handler failed');
      return errorAnswer(errors.internal());
    };
    this.front = new Front({
      maxHeaderBytes: limits.max_header_bytes,
      tls: listen.tls,
      onHandlerError,
      maxBufferedBodyBytes: limits.max_buffered_body_bytes,
    });
    const uws = uwsInUse();
    if (uws) this.logger.info({ uws: uws.version, node: process.versions.node, skipped: uws.skipped }, `uws ${uws.version} native`);
    this.clientRoutes(this.front);
    const port = await this.front.listen(listen.host, listen.port);
    this.adminFront = new Front({ maxHeaderBytes: limits.max_header_bytes, onHandlerError });
    adminRoutes(this.adminFront, this);
    const adminPort = await this.adminFront.listen(admin.host, admin.port);
    this.discovery = new Discovery(this.config, this.router, this.logger, () => {
      const all = new Set(this.router.pools().flatMap((p) => this.router.endpoints(p)));
      this.upstreams.retain(all);
    });
    await this.discovery.start();
    this.scraper = new Scraper(this.router, scraperConfig(this.config), this.logger);
    this.scraper.start();
    if (this.config.auth.mode === 'none') {
      this.logger.warn('auth.mode is "none": every client that reaches the listener can use every model');
    }
    const scheme = listen.tls ? 'https' : 'http';
    return {
      url: `${scheme}://${hostForUrl(listen.host)}:${port}`,
      adminUrl: `http://${hostForUrl(admin.host)}:${adminPort}`,
      port,
      adminPort,
    };
  }

  private clientRoutes(front: Front): void {
    const maxBody = this.config.limits.max_body_bytes;
    front.post('/v1/chat/completions', maxBody, (client, req) => new Exchange(this, client, req, 'chat'));
    front.post('/v1/completions', maxBody, (client, req) => new Exchange(this, client, req, 'completions'));
    front.get('/v1/models', () => {
      const created = Math.floor(Date.now() / 1000);
      const data = this.router.models().map((id) => ({ id, object: 'model', created, owned_by: 'infergate' }));
      return jsonAnswer('200 OK', JSON.stringify({ object: 'list', data }));
    });
    const known = new Set(['/v1/chat/completions', '/v1/completions', '/v1/models']);
    front.fallback((method, url) =>
      errorAnswer(known.has(url) ? errors.methodNotAllowed(method, url) : errors.routeNotFound(method, url)),
    );
  }

  private endpointStates(): Array<[string, string, number, number]> {
    const now = Date.now();
    const out: Array<[string, string, number, number]> = [];
    for (const name of this.router.pools()) {
      for (const ep of this.router.pool(name)?.debug(now).endpoints ?? []) {
        out.push([name, ep.endpoint, ep.in_flight, ep.age_ms === null ? NaN : ep.age_ms / 1000]);
      }
    }
    return out;
  }

  /** Stop accepting, let in-flight requests finish (up to drain_timeout), then release everything. */
  async stop(drainMs = this.config.limits.drain_timeout): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.front?.close();
    this.adminFront?.close();
    if (this.inFlight > 0) {
      this.logger.info({ in_flight: this.inFlight, drain_ms: drainMs }, 'draining in-flight requests');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.drainWaiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.discovery?.stop();
    await this.scraper?.stop();
    await this.upstreams.close();
  }
}

/** The address as bound, in URL form (an IPv6 address in brackets): 0.0.0.0 says "every interface". */
function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
