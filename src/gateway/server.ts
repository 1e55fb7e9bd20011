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
import type { Answer, ClientSide } from './client.js';
import { Discovery } from './discovery.js';
import { Exchange } from './exchange.js';
import { connectionBound, FdGuard, openFileLimit } from './fd-guard.js';
import { Upstreams } from './upstreams.js';
import { Front } from './uws-front.js';

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
  private fdGuard: FdGuard | undefined;

  constructor(
    readonly config: Config,
    readonly logger: Logger,
  ) {
    this.router = new Router(routerConfig(config));
    this.upstreams = new Upstreams(config.limits);
    this.metrics = new GatewayMetrics({
      endpointStates: () => this.endpointStates(),
      bufferedBodyBytes: () => this.front?.bodyBudget.inUse ?? 0,
      openConnections: () => this.front?.openConnections ?? 0,
    });
    this.stickyHeaders = new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : [])));
  }

  onExchangeDone(ex: { readonly client: ClientSide }): void {
    this.front?.release(ex.client);
    if (this.draining && this.inFlight === 0) this.drainWaiter?.();
  }

  async start(): Promise<GatewayAddresses> {
    const { listen, admin, limits } = this.config;
    const onHandlerError = (err: unknown): Answer => {
      this.logger.error({ err }, 'request handler failed');
      return errorAnswer(errors.internal());
    };
    const headTooLarge = errorAnswer(errors.headersTooLarge(limits.max_header_bytes));
    const fdLimit = openFileLimit();
    const bound = connectionBound(limits.max_connections, fdLimit);
    if (bound.warning) this.logger.warn(bound.warning);
    this.front = new Front({
      maxHeaderBytes: limits.max_header_bytes,
      headTooLarge,
      tls: listen.tls,
      onHandlerError,
      maxBufferedBodyBytes: limits.max_buffered_body_bytes,
      connections: {
        max: bound.max,
        perClient: limits.max_connections_per_client ?? 0,
        refusal: errorAnswer(errors.tooManyConnections()),
        onRefused: () => this.metrics.rejected.inc({ reason: 'too_many_connections', pool: '' }),
      },
    });
    this.clientRoutes(this.front);
    const port = await this.front.listen(listen.host, listen.port);
    this.logger.info({ max_connections: bound.max, max_connections_per_client: limits.max_connections_per_client, open_file_limit: fdLimit }, 'client connections bounded');
    this.fdGuard = this.startFdGuard(this.front);
    this.adminFront = new Front({ maxHeaderBytes: limits.max_header_bytes, headTooLarge, onHandlerError });
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

  /** Stops accepting on the client port while the process has no file descriptor left (fd-guard.ts). */
  private startFdGuard(front: Front): FdGuard {
    const guard = new FdGuard({
      onExhausted: () => {
        front.pauseAccepting();
        this.logger.error(
          { open_file_limit: openFileLimit(), open_connections: front.openConnections },
          'no file descriptor left: the client port stops accepting until some are free (raise ulimit -n, or lower limits.max_connections)',
        );
      },
      onRecovered: () => {
        if (this.draining) return true;
        if (!front.resumeAccepting()) return false;
        this.logger.warn('file descriptors are free again: the client port accepts again');
        return true;
      },
    });
    guard.start();
    return guard;
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
    this.fdGuard?.stop();
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
