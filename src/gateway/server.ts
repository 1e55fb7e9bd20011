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
import { Admission } from './admission.js';
import { Authenticator, isApiError, type AuthResult } from '../auth/authenticator.js';
import { readSecret } from '../config/secrets.js';
import { addressMatcher } from '../common/ip.js';
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
  readonly isTrustedProxy: (peer: string) => boolean;
  readonly scheme: 'http' | 'https';
  /** made by start(): the keys are read (and a jwks_url fetched) there */
  admission: Admission = new Admission(undefined);
  poolKeys: ReadonlyMap<string, string> = new Map();
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
      authDisabled: config.auth.mode === 'none',
    });
    this.isTrustedProxy = addressMatcher(config.trusted_proxies);
    this.scheme = config.listen.tls ? 'https' : 'http';
    this.stickyHeaders = new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : [])));
  }

  onExchangeDone(): void {
    if (this.draining && this.inFlight === 0) this.drainWaiter?.();
  }

  async start(): Promise<GatewayAddresses> {
    const { listen, admin, limits, auth } = this.config;
    // keys first: a missing key file or variable stops the start before anything listens
    const keys = new Map<string, string>();
    for (const [name, pool] of Object.entries(this.config.pools)) {
      const key = readSecret({ file: pool.api_key_file, env: pool.api_key_env }, `pools.${name}.api_key`);
      if (key !== undefined) keys.set(name, key);
    }
    this.poolKeys = keys;
    if (auth.mode === 'jwt') {
      const log = this.logger;
      this.admission = new Admission(await Authenticator.create(auth.jwt!, { warn: (o, m) => log.warn(o, m), info: (o, m) => log.info(o, m) }));
    } else {
      this.logger.warn('auth.mode is "none": every client that reaches the listener can use every model');
    }
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
    this.scraper = new Scraper(this.router, scraperConfig(this.config, this.poolKeys), this.logger);
    this.scraper.start();
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
    // the models the caller's token allows (all of them with auth off); 401 without a valid token
    const listModels = (auth: AuthResult): Answer => {
      if (isApiError(auth)) {
        if (auth.rejectReason) this.metrics.rejected.inc({ reason: auth.rejectReason, pool: '' });
        return errorAnswer(auth);
      }
      const created = Math.floor(Date.now() / 1000);
      const data = this.router.models().filter((id) => auth.models.allows(id)).map((id) => ({ id, object: 'model', created, owned_by: 'infergate' }));
      return jsonAnswer('200 OK', JSON.stringify({ object: 'list', data }));
    };
    front.get('/v1/models', (_head, authorization) => {
      const auth = this.admission.authenticate(authorization);
      return auth instanceof Promise ? auth.then(listModels) : listModels(auth);
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
    this.admission.close();
    await this.scraper?.stop();
    await this.upstreams.close();
  }
}

/** The address as bound, in URL form (an IPv6 address in brackets): 0.0.0.0 says "every interface". */
function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
