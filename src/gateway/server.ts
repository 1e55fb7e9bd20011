/**
 * The live gateway: the client listener and its routes, the admin listener (admin.ts), DNS discovery,
 * the metric scraper, and shutdown. The listeners are fronts (uws-front.ts); a request's handling is an
 * Exchange (exchange.ts).
 */
import type { Config } from '../config/schema.js';
import { routerConfig, scraperConfig } from '../config/routing.js';
import type { Logger } from '../observability/logger.js';
import { GatewayMetrics } from '../observability/metrics.js';
import { Quota } from '../quota/index.js';
import { Router, type DebugEndpoint } from '../routing/index.js';
import { Scraper } from '../signals/scraper.js';
import type { GatewayContext } from './context.js';
import { errors } from '../openai/errors.js';
import { adminRoutes } from './admin.js';
import { DecisionRing } from './decisions.js';
import { readiness, type Readiness } from './readiness.js';
import { errorAnswer, jsonAnswer } from './answers.js';
import type { Answer, ClientSide } from './client.js';
import { Discovery } from './discovery.js';
import { Exchange } from './exchange.js';
import { connectionBound, FdGuard, openFileLimit } from './fd-guard.js';
import { ShuttingDown, Upstreams } from './upstreams.js';
import { Admission } from './admission.js';
import { Authenticator, isApiError, type AuthResult } from '../auth/authenticator.js';
import { readSecret } from '../config/secrets.js';
import { addressMatcher } from '../common/ip.js';
import { Front } from './uws-front.js';
import { FlowControl } from './flow.js';
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
  readonly decisions: DecisionRing | null;
  readonly quota: Quota;
  readonly flow: FlowControl;
  /** Date.now() when the process began (the status page's uptime) */
  readonly startedAt = Date.now();
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
  private fdGuard: FdGuard | undefined;

  constructor(
    readonly config: Config,
    readonly logger: Logger,
  ) {
    this.router = new Router(routerConfig(config));
    this.upstreams = new Upstreams(config.limits);
    this.metrics = new GatewayMetrics({
      pools: () => [...this.poolViews(Date.now())].map(([pool, endpoints]) => ({ pool, endpoints })),
      bufferedBodyBytes: () => this.front?.bodyBudget.inUse ?? 0,
      openConnections: () => this.front?.openConnections ?? 0,
      readiness: () => {
        const r = this.readiness(Date.now());
        return this.draining ? { ...r, ready: false } : r; // as /readyz answers: 503 while draining
      },
      authDisabled: config.auth.mode === 'none',
      uwsVersion: () => uwsInUse()?.version,
      queues: () => this.flow.lengths(),
    });
    this.flow = new FlowControl(config, this.metrics, (err) => this.logger.error({ err }, 'flow control failed'));
    this.decisions = config.admin.decisions > 0 ? new DecisionRing(config.admin.decisions) : null;
    this.quota = new Quota(config.tenants, config.quota, {
      logger: this.logger,
      onBackendUp: (up) => this.metrics.quotaBackendUp.set(up ? 1 : 0),
    });
    this.isTrustedProxy = addressMatcher(config.trusted_proxies);
    this.scheme = config.listen.tls ? 'https' : 'http';
    this.stickyHeaders = new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : [])));
  }

  onExchangeDone(ex: { readonly client: ClientSide }): void {
    this.front?.release(ex.client);
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
    const uws = uwsInUse();
    if (uws) this.logger.info({ uws: uws.version, node: process.versions.node, skipped: uws.skipped }, `uws ${uws.version} native`);
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
      this.metrics.retainEndpoints(all);
    });
    await this.discovery.start();
    // new signals may show room for a queued request (flow.ts)
    const router = this.router;
    const flow = this.flow;
    const scrapeTarget = {
      pools: () => router.pools(),
      endpoints: (pool: string) => router.endpoints(pool),
      updateSignals(endpoint: string, sig: Parameters<Router['updateSignals']>[1], now: number): void {
        router.updateSignals(endpoint, sig, now);
        flow.wakeAll();
      },
      signalsFailed(endpoint: string, now: number): void {
        router.signalsFailed(endpoint, now);
        flow.wakeAll();
      },
    };
    this.scraper = new Scraper(scrapeTarget, scraperConfig(this.config, this.poolKeys), this.logger);
    this.scraper.start();
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
    front.get('/v1/models', (_head, _query, authorization) => {
      const auth = this.admission.authenticate(authorization);
      return auth instanceof Promise ? auth.then(listModels) : listModels(auth);
    });
    const known = new Set(['/v1/chat/completions', '/v1/completions', '/v1/models']);
    front.fallback((method, url) =>
      errorAnswer(known.has(url) ? errors.methodNotAllowed(method, url) : errors.routeNotFound(method, url)),
    );
  }

  /** Each pool's endpoints as the router sees them now (signals, age, in-flight work, eligibility). */
  poolViews(now: number): Map<string, DebugEndpoint[]> {
    const out = new Map<string, DebugEndpoint[]>();
    for (const name of this.router.pools()) out.set(name, this.router.pool(name)?.debug(now).endpoints ?? []);
    return out;
  }

  policyOf(pool: string): string {
    return this.config.pools[pool]?.policy ?? '';
  }

  staleAfterMs(pool: string): number {
    return this.config.pools[pool]?.metrics.stale_after ?? 0;
  }

  /** /readyz's judgement (readiness.ts); `views` when the caller has them already. */
  readiness(now: number, views?: ReadonlyMap<string, readonly DebugEndpoint[]>): Readiness {
    return readiness(this.router, this.config.models, this.config.admin.ready_when, now, views);
  }

  /**
   * Stop accepting, let in-flight requests finish (up to drain_timeout), cut what is left with a
   * `shutting_down` error (an SSE stream gets it as its last event), then release everything. The admin
   * listener stays up until the end, its /readyz answering 503 `draining`.
   */
  async stop(drainMs = this.config.limits.drain_timeout): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.fdGuard?.stop();
    this.front?.close();
    if (this.inFlight > 0) {
      this.logger.info({ in_flight: this.inFlight, drain_ms: drainMs }, 'draining in-flight requests');
      await this.inFlightDone(drainMs);
      if (this.inFlight > 0) this.logger.warn({ in_flight: this.inFlight }, 'drain timeout: cutting the requests left');
    }
    this.flow.close(); // requests still queued get 503 shutting_down
    this.discovery?.stop();
    this.admission.close();
    await this.scraper?.stop();
    await this.upstreams.close(new ShuttingDown());
    // the cut requests answer (error event or 503) as undici reports the destroyed connections
    if (this.inFlight > 0) await this.inFlightDone(1_000);
    await this.quota.close(); // after the last request released its lease
    this.adminFront?.close();
  }

  /** Resolves when no request is in flight, or after `ms`. */
  private inFlightDone(ms: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.drainWaiter = () => {
        this.drainWaiter = undefined;
        done();
      };
    });
  }
}

/** The address as bound, in URL form (an IPv6 address in brackets): 0.0.0.0 says "every interface". */
function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
