/**
 * The live gateway: the client listener and its routes, the admin listener (admin.ts), DNS discovery,
 * the metric scraper, and shutdown. The listeners are fronts (uws-front.ts); a request's handling is an
 * Exchange (exchange.ts).
 */
import type { Config } from '../config/schema.js';
import { poolUsesTls, routerConfig, scraperConfig } from '../config/routing.js';
import { planReload } from '../config/reload-plan.js';
import type { Logger } from '../observability/logger.js';
import { GatewayMetrics } from '../observability/metrics.js';
import { Quota } from '../quota/index.js';
import { startCluster, type RoutingShare } from '../cluster/index.js';
import { Router, type DebugEndpoint } from '../routing/index.js';
import { Scraper } from '../signals/scraper.js';
import type { GatewayContext } from './context.js';
import { errors, type ApiError } from '../openai/errors.js';
import { adminRoutes } from './admin.js';
import { DecisionRing } from './decisions.js';
import { ResponseAffinity } from './response-affinity.js';
import { readiness, type Readiness } from './readiness.js';
import { errorAnswer, jsonAnswer } from './answers.js';
import type { Answer, ClientSide } from './client.js';
import { Discovery } from './discovery.js';
import { Exchange } from './exchange.js';
import { connectionBound, FdGuard, openFileLimit } from './fd-guard.js';
import { ShuttingDown, Upstreams, type UpstreamTls } from './upstreams.js';
import { RetryBudgets } from './retry.js';
import { BodyBudget } from './body.js';
import { readFileSync } from 'node:fs';
import { Admission } from './admission.js';
import { Authenticator, isApiError, type AuthResult } from '../auth/authenticator.js';
import { readSecret } from '../config/secrets.js';
import { generationOf, GenerationContext, type Generation } from './generation.js';
import { Front, type FrontFacts } from './uws-front.js';
import { TlsReloader } from './tls-reload.js';
import { Cors } from './cors.js';
import type { ApiKind } from '../openai/validate.js';
import { API_ALIAS_PATHS, API_PATHS } from '../openai/validate.js';
import { addressMatcher } from '../common/ip.js';
import { maxBodyOf } from './request-checks.js';
import { recordFrontAnswer } from './record.js';
import { parseTraceparent } from '../observability/trace.js';
import { randomUUID } from 'node:crypto';
import { FlowControl } from './flow.js';
import { uwsInUse } from '../common/uws.js';
import { infergateVersion } from '../common/version.js';
import { createTracing, LOCAL_TRACING, type Tracing } from '../observability/tracing.js';

export interface GatewayAddresses {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
}

/**
 * Where a worker of `serve --workers N` listens (gateway/workers.ts): the client port its parent checked
 * and chose, shared with its siblings (SO_REUSEPORT), and a private admin listener the parent's aggregating
 * admin endpoint reads. The config keeps the file's addresses, so a reload sees no change there.
 */
export interface WorkerPlacement {
  port: number;
  adminHost: string;
  adminPort: number;
}

/** What a reload applied (Gateway.reload). */
export interface ReloadOutcome {
  generation: number;
  /** restart-only keys that changed (kept at their running values) */
  needsRestart: string[];
  /** what changed live: top-level keys, pools.NAME, models.NAME */
  changed: string[];
}

export class Gateway implements GatewayContext {
  readonly router: Router;
  readonly upstreams: Upstreams;
  readonly metrics: GatewayMetrics;
  decisions: DecisionRing | null;
  readonly responseAffinity: ResponseAffinity;
  readonly quota: Quota;
  readonly flow: FlowControl;
  /** Date.now() when the process began (the status page's uptime) */
  readonly startedAt = Date.now();
  readonly scheme: 'http' | 'https';
  /**
   * The config generation new requests start on (generation.ts): replaced whole by start() (the keys are
   * read, and a jwks_url fetched, there) and by each reload; a request keeps the one it started with.
   */
  private gen: Generation;
  private genCtx: GenerationContext;
  /** the HTTPS pools and their CA certificates (read at start and on each reload) */
  private poolTls = new Map<string, UpstreamTls>();
  /** cross-origin access (the `cors` section; a change needs a restart: the front holds it) */
  readonly cors: Cors | undefined;
  /** request spans (made by start(): the OpenTelemetry SDK is loaded only when tracing exports) */
  tracing: Tracing = LOCAL_TRACING;
  draining = false;
  inFlight = 0;
  readonly retryBudgets = new RetryBudgets();
  /** limits.max_buffered_body_bytes (restart-only): bodies being received and bodies held by requests in flight */
  readonly bodies: BodyBudget;
  private scraper: Scraper | undefined;
  private discovery: Discovery | undefined;
  private front: Front | undefined;
  private adminFront: Front | undefined;
  private drainWaiter: (() => void) | undefined;
  private fdGuard: FdGuard | undefined;
  private tlsReloader: TlsReloader | undefined;
  /** routing knowledge shared with the replicas (the `cluster` section; src/cluster/) */
  private readonly cluster: RoutingShare | undefined;

  constructor(
    config: Config,
    readonly logger: Logger,
    /** set in a worker of `serve --workers N` */
    private readonly placement?: WorkerPlacement,
  ) {
    this.bodies = new BodyBudget(config.limits.max_buffered_body_bytes);
    this.gen = generationOf(0, config, new Map(), new Admission(undefined));
    this.genCtx = new GenerationContext(this, this.gen);
    this.router = new Router(routerConfig(config), {
      onEjection: (pool, endpoint, outcome) => this.metrics.ejection(pool, endpoint, outcome),
      onLearn: (pool, endpoint, chain, totalBlocks) => this.cluster?.learned(pool, endpoint, chain, totalBlocks),
    });
    this.upstreams = new Upstreams(
      config.limits,
      // a removed endpoint's series are dropped again once its last request has ended (and recorded)
      () => this.metrics.retainEndpoints(this.allEndpoints()),
      (endpoint) => this.upstreamTlsOf(endpoint),
    );
    this.metrics = new GatewayMetrics({
      pools: () => [...this.poolViews(Date.now())].map(([pool, endpoints]) => ({ pool, endpoints })),
      bufferedBodyBytes: () => this.bodies.inUse,
      openConnections: () => this.front?.openConnections ?? 0,
      storedResponseIds: () => this.responseAffinity?.size ?? 0,
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
    this.responseAffinity = new ResponseAffinity(config.response_affinity);
    this.quota = new Quota(config.tenants, config.quota, {
      logger: this.logger,
      onBackendUp: (up) => this.metrics.quotaBackendUp.set(up ? 1 : 0),
    });
    this.cluster = startCluster(config.cluster, this.router, this.metrics.registry, this.logger, {
      ipc: placement !== undefined,
      remember: (a) => this.responseAffinity.rememberRemote(a.id, a),
    });
    const cluster = this.cluster;
    if (cluster) this.responseAffinity.onRemember = (id, served) => cluster.answered({ id, ...served });
    this.scheme = config.listen.tls ? 'https' : 'http';
    this.cors = config.cors ? new Cors(config.cors) : undefined;
  }

  /** The current generation's config (what new requests start on). */
  get config(): Config {
    return this.gen.config;
  }
  get poolKeys(): ReadonlyMap<string, string> {
    return this.gen.poolKeys;
  }
  get stickyHeaders(): ReadonlySet<string> {
    return this.gen.stickyHeaders;
  }
  get admission(): Admission {
    return this.gen.admission;
  }
  isTrustedProxy(peer: string): boolean {
    return this.gen.isTrustedProxy(peer);
  }
  /** the current generation's number: 1 after start, +1 per applied reload */
  get generation(): number {
    return this.gen.id;
  }

  private setGeneration(gen: Generation): void {
    this.gen = gen;
    this.genCtx = new GenerationContext(this, gen);
  }

  onExchangeDone(ex: { readonly client: ClientSide }): void {
    this.front?.release(ex.client);
    if (this.draining && this.inFlight === 0) this.drainWaiter?.();
  }

  async start(): Promise<GatewayAddresses> {
    const { listen, admin, limits } = this.config;
    // keys first: a missing key file or variable stops the start before anything listens
    const keys = poolKeysOf(this.config);
    // the CA certificates of HTTPS pools (check-config names a file that cannot be read)
    this.poolTls = poolTlsOf(this.config);
    this.setGeneration(generationOf(1, this.config, keys, await this.admissionFor(this.config)));
    this.tracing = await createTracing(this.config.tracing, this.logger, infergateVersion());
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
      onAnswered: (facts, status, answer) => this.frontAnswered(facts, status, answer),
      joinShared: this.placement !== undefined,
      bodyBudget: this.bodies,
      cors: this.cors,
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
    const port = await this.front.listen(listen.host, this.placement?.port ?? listen.port);
    this.logger.info({ max_connections: bound.max, max_connections_per_client: limits.max_connections_per_client, open_file_limit: fdLimit }, 'client connections bounded');
    this.fdGuard = this.startFdGuard(this.front);
    if (listen.tls) this.tlsReloader = this.startTlsReload(this.front, listen.tls);
    this.adminFront = new Front({ maxHeaderBytes: limits.max_header_bytes, headTooLarge, onHandlerError });
    adminRoutes(this.adminFront, this);
    const adminHost = this.placement?.adminHost ?? admin.host;
    const adminPort = await this.adminFront.listen(adminHost, this.placement?.adminPort ?? admin.port);
    this.discovery = this.newDiscovery(this.config);
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
    this.scraper = new Scraper(scrapeTarget, scraperConfig(this.config, this.poolKeys, casOf(this.poolTls)), this.logger);
    this.scraper.start();
    const scheme = listen.tls ? 'https' : 'http';
    return {
      url: `${scheme}://${hostForUrl(listen.host)}:${port}`,
      adminUrl: `http://${hostForUrl(adminHost)}:${adminPort}`,
      port,
      adminPort,
    };
  }

  /** The admission of a config: its authenticator (keys read, a jwks_url fetched) for auth.mode jwt. */
  private async admissionFor(config: Config): Promise<Admission> {
    if (config.auth.mode !== 'jwt') {
      this.logger.warn('auth.mode is "none": every client that reaches the listener can use every model');
      return new Admission(undefined);
    }
    const log = this.logger;
    return new Admission(await Authenticator.create(config.auth.jwt!, { warn: (o, m) => log.warn(o, m), info: (o, m) => log.info(o, m) }));
  }

  private newDiscovery(config: Config): Discovery {
    return new Discovery(config, this.router, this.logger, () => this.endpointsChanged());
  }

  private allEndpoints(): Set<string> {
    return new Set(this.router.pools().flatMap((p) => this.router.endpoints(p)));
  }

  /** Endpoints left the router (discovery, reload): their upstream pools close once their requests end. */
  private endpointsChanged(): void {
    const all = this.allEndpoints();
    this.upstreams.retain(all);
    this.metrics.retainEndpoints(all);
  }

  /**
   * Apply a new, validated config (reload.ts). Everything that can fail is built first (pool keys, the
   * authenticator): a failure throws and changes nothing. Then, in one synchronous step, the routing
   * (pools kept by name with their prefix index and signals; removed endpoints leave it), the scraper, DNS
   * discovery, the upstream pools (removed endpoints' close after their requests end), tenant limits, the
   * decision ring and the generation new requests start on are replaced. Requests in flight keep the
   * generation they started with. Restart-only keys (reload-plan.ts) keep their running values and are
   * named in the outcome.
   */
  async reload(next: Config): Promise<ReloadOutcome> {
    if (this.draining) throw new Error('the gateway is shutting down');
    const running = this.config;
    const plan = planReload(running, next);
    const cfg = plan.config;
    const needsRestart = [...plan.needsRestart];
    const poolKeys = poolKeysOf(cfg);
    const poolTls = poolTlsOf(cfg);
    // the authenticator is made again when auth changed, and for key files and variables (a rotated key
    // is read); a jwks_url with unchanged settings keeps its key set and refreshes as before
    const auth = cfg.auth;
    const rebuildAuth = !sameJson(running.auth, auth) || (auth.mode === 'jwt' && auth.jwt?.jwks_url === undefined);
    const admission = rebuildAuth ? await this.admissionFor(cfg) : this.admission;
    if (this.draining) {
      if (admission !== this.admission) admission.close();
      throw new Error('the gateway is shutting down');
    }
    // ---- the swap: synchronous from here on, so no request sees half of it
    if (!sameJson(running.tenants, cfg.tenants) && !this.quota.setTenants(cfg.tenants)) {
      needsRestart.push('tenants');
      cfg.tenants = running.tenants;
    }
    this.router.reconfigure(routerConfig(keepDiscovered(cfg, running, this.router)));
    this.upstreams.reconfigure(cfg.limits);
    this.flow.reconfigure(cfg);
    // HTTPS settings changed: every upstream pool is made again (its requests finish on the old one)
    if (!sameJson([...this.poolTls], [...poolTls])) this.upstreams.retain(new Set());
    this.poolTls = poolTls;
    this.endpointsChanged();
    this.scraper?.reconfigure(scraperConfig(cfg, poolKeys, casOf(poolTls)));
    if (this.discovery) {
      this.discovery.stop();
      this.discovery = this.newDiscovery(cfg);
      this.discovery.start().catch((err: unknown) => this.logger.error({ err }, 'discovery failed'));
    }
    if (cfg.admin.decisions !== running.admin.decisions) {
      this.decisions = cfg.admin.decisions > 0 ? new DecisionRing(cfg.admin.decisions) : null;
    }
    this.responseAffinity.configure(cfg.response_affinity);
    this.metrics.authDisabled.set(auth.mode === 'none' ? 1 : 0);
    const old = this.gen;
    this.setGeneration(generationOf(old.id + 1, cfg, poolKeys, admission));
    if (admission !== old.admission) old.admission.close(); // requests holding it finish with it
    return { generation: this.gen.id, needsRestart, changed: plan.changed };
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

  /** New connections get the certificate and key the files hold after SIGHUP or a change (tls-reload.ts). */
  private startTlsReload(front: Front, tls: { cert: string; key: string; watch: boolean }): TlsReloader {
    return new TlsReloader({
      ...tls,
      apply: (pair) => front.reloadTls(pair),
      onResult: (result, trigger, detail) => {
        this.metrics.tlsReloads.inc({ result, trigger });
        if (result === 'reloaded') this.logger.info({ trigger, fingerprint: detail.fingerprint }, 'TLS certificate reloaded: new connections get it');
        else this.logger.error({ trigger, error: detail.error }, 'TLS certificate reload failed: the previous certificate keeps serving');
      },
    });
  }

  private clientRoutes(front: Front): void {
    const limits = this.config.limits;
    const maxBody = limits.max_body_bytes;
    for (const kind of Object.keys(API_PATHS) as ApiKind[]) {
      front.post(API_PATHS[kind], maxBodyOf(limits, kind), (client, req) => new Exchange(this.genCtx, client, req, kind));
    }
    // vLLM's other paths for an API (/rerank, /v2/rerank, /score), sent on to the API's path
    for (const [path, kind] of Object.entries(API_ALIAS_PATHS)) {
      front.post(path, maxBody, (client, req) => new Exchange(this.genCtx, client, req, kind));
    }
    // calls on a stored Responses API answer, relayed to the server that stored it (response-affinity.ts)
    front.relayedGet(RETRIEVE_PATH, (client, req) => new Exchange(this.genCtx, client, req, 'responses', 'retrieve'));
    front.post(CANCEL_PATH, maxBody, (client, req) => new Exchange(this.genCtx, client, req, 'responses', 'cancel'));
    const created = Math.floor(this.startedAt / 1000);
    // with the context length its servers report, where they do (vLLM's field, which clients read to size
    // their requests)
    const card = (id: string) => {
      const maxModelLen = this.router.maxModelLen(id);
      return { id, object: 'model', created, owned_by: 'infergate', ...(maxModelLen !== undefined && { max_model_len: maxModelLen }) };
    };
    /** The token's verdict, or the answer refusing it (401, counted). */
    const refusal = (auth: AuthResult): Answer | undefined => {
      if (!isApiError(auth)) return undefined;
      if (auth.rejectReason) this.metrics.rejected.inc({ reason: auth.rejectReason, pool: '' });
      return errorAnswer(auth);
    };
    const withAuth = (authorization: string | undefined, answer: (auth: Exclude<AuthResult, ApiError>) => Answer): Answer | Promise<Answer> => {
      const then = (auth: AuthResult) => refusal(auth) ?? answer(auth as Exclude<AuthResult, ApiError>);
      const auth = this.admission.authenticate(authorization);
      return auth instanceof Promise ? auth.then(then) : then(auth);
    };
    // the models the caller's token allows (all of them with auth off); 401 without a valid token
    front.get('/v1/models', (_head, _query, authorization) =>
      withAuth(authorization, (auth) => {
        const data = this.router.models().filter((id) => auth.models.allows(id)).map(card);
        return jsonAnswer('200 OK', JSON.stringify({ object: 'list', data }));
      }),
    );
    // one model (an alias too) by its id, percent-encoded or not ("meta-llama%2FLlama-3-8B" or
    // "meta-llama/Llama-3-8B"); a model the token does not allow is not found, as it is not listed
    front.get('/v1/models/*', (_head, _query, authorization, url) => {
      const id = modelIdOf(url);
      if (id === undefined) return errorAnswer(errors.badModelId());
      return withAuth(authorization, (auth) =>
        auth.models.allows(id) && this.router.models().includes(id) ? jsonAnswer('200 OK', JSON.stringify(card(id))) : errorAnswer(errors.modelNotFound(id)),
      );
    });
    // vLLM's liveness path on the port clients use, for probes and load balancers that can reach only that
    // port (vLLM serves it on its API port): no token, nothing about the pools (the admin port's
    // /readyz says whether the models can be served). While draining the listener is closed: no answer.
    front.get('/health', () => jsonAnswer('200 OK', '{"status":"ok"}'));
    // DELETE /v1/responses/{id} is OpenAI's, not vLLM's: no server behind the gateway could do it (404, as any unknown route)
    front.fallback((method, url, allow) =>
      errorAnswer(allow !== undefined && !(method === 'DELETE' && isRetrievePath(url)) ? errors.methodNotAllowed(method, url) : errors.routeNotFound(method, url)),
    );
  }

  /** How an endpoint is reached over HTTPS: its (first) pool's setting; undefined for plain HTTP. */
  private upstreamTlsOf(endpoint: string): UpstreamTls | undefined {
    for (const pool of this.router.pools()) {
      if (this.router.endpoints(pool).includes(endpoint)) return this.poolTls.get(pool);
    }
    return undefined;
  }

  /** The access line of a request the client port's front answered itself (no exchange). */
  private frontAnswered(facts: FrontFacts, status: number, answer: Answer | undefined): void {
    const id = facts.requestId;
    recordFrontAnswer(this, {
      requestId: id !== '' && id.length <= 200 ? id : randomUUID(),
      method: facts.method,
      path: facts.url,
      peer: facts.peer,
      forwardedFor: facts.xForwardedFor !== '' && this.isTrustedProxy(facts.peer) ? facts.xForwardedFor : undefined,
      status,
      code: answer?.code ?? (facts.cut ? 'invalid_framing' : undefined),
      rejectReason: answer?.rejectReason,
      traceId: parseTraceparent(facts.traceparent)?.traceId,
      started: facts.started,
      closedBy: facts.cut ? 'gateway' : undefined,
    });
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
    this.tlsReloader?.close();
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
    this.cluster?.close();
    await this.tracing.shutdown(); // the last spans exported (bounded by tracing.export_timeout)
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

/** Each pool's upstream key (api_key_file / api_key_env); throws naming the one that cannot be read. */
/** The HTTPS pools and their CA certificates, read from the files named (throws when one cannot be read). */
function poolTlsOf(config: Config): Map<string, UpstreamTls> {
  const out = new Map<string, UpstreamTls>();
  for (const [name, pool] of Object.entries(config.pools)) {
    if (poolUsesTls(pool)) out.set(name, { ca: pool.tls_ca_file !== undefined ? readFileSync(pool.tls_ca_file, 'utf8') : undefined });
  }
  return out;
}

function casOf(poolTls: ReadonlyMap<string, UpstreamTls>): Map<string, string> {
  return new Map([...poolTls].flatMap(([pool, t]) => (t.ca !== undefined ? [[pool, t.ca] as const] : [])));
}

function poolKeysOf(config: Config): Map<string, string> {
  const keys = new Map<string, string>();
  for (const [name, pool] of Object.entries(config.pools)) {
    const key = readSecret({ file: pool.api_key_file, env: pool.api_key_env }, `pools.${name}.api_key`);
    if (key !== undefined) keys.set(name, key);
  }
  return keys;
}

/**
 * `cfg` with, for a pool that keeps the same DNS discovery, the endpoints discovery found (what the router
 * lists beyond the old static ones) added to its static list, so that a reload does not drop them until
 * the next lookup.
 */
function keepDiscovered(cfg: Config, running: Config, router: Router): Config {
  let out = cfg;
  for (const [name, pool] of Object.entries(cfg.pools)) {
    const was = running.pools[name];
    if (!pool.discovery || !was?.discovery || !sameJson(pool.discovery, was.discovery)) continue;
    const oldStatic = new Set(was.endpoints);
    const found = router.endpoints(name).filter((e) => !oldStatic.has(e));
    if (found.length === 0) continue;
    if (out === cfg) out = { ...cfg, pools: { ...cfg.pools } };
    out.pools[name] = { ...pool, endpoints: [...new Set([...pool.endpoints, ...found])] };
  }
  return out;
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);


/** A stored Responses API answer's routes (uWS parameters: one path segment each). */
const RETRIEVE_PATH = '/v1/responses/:response_id';
const CANCEL_PATH = '/v1/responses/:response_id/cancel';
const RETRIEVE_URL = /^\/v1\/responses\/[^/]+$/;

function isRetrievePath(url: string): boolean {
  return RETRIEVE_URL.test(url);
}

const MODELS_PREFIX = '/v1/models/'.length;

/** The model id of a `/v1/models/{id}` path, percent-decoded; undefined when the encoding is broken. */
export function modelIdOf(url: string): string | undefined {
  const raw = url.slice(MODELS_PREFIX);
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw); // throws on a bad escape or bytes that are not UTF-8
  } catch {
    return undefined;
  }
}

/** The address as bound, in URL form (an IPv6 address in brackets): 0.0.0.0 says "every interface". */
function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
