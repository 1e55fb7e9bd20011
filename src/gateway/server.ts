/**
 * The live gateway: the client listener (uWS), the admin listener, the metric scraper, and shutdown.
 * Request handling itself lives in exchange.ts.
 */
import { accessSync, constants } from 'node:fs';
import type { HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Config } from '../config/schema.js';
import { routerConfig, scraperConfig } from '../config/routing.js';
import type { Logger } from '../observability/logger.js';
import { GatewayMetrics } from '../observability/metrics.js';
import { Router } from '../routing/index.js';
import { Scraper } from '../signals/scraper.js';
import type { GatewayContext } from './context.js';
import { errorBody, errors, type ApiError } from '../openai/errors.js';
import { Discovery } from './discovery.js';
import { Exchange } from './exchange.js';
import { Upstreams } from './upstreams.js';
import { loadUws, type Uws } from '../common/uws.js';
import { listenExclusive } from '../common/listen.js';

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
  private uws: Uws | undefined;
  private sockets: us_listen_socket[] = [];
  private drainWaiter: (() => void) | undefined;

  constructor(
    readonly config: Config,
    readonly logger: Logger,
  ) {
    this.router = new Router(routerConfig(config));
    this.upstreams = new Upstreams(config.limits);
    this.metrics = new GatewayMetrics({ endpointStates: () => this.endpointStates() });
    this.stickyHeaders = new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : [])));
  }

  onExchangeDone(): void {
    if (this.draining && this.inFlight === 0) this.drainWaiter?.();
  }

  async start(): Promise<GatewayAddresses> {
    const uws = loadUws(this.config.limits.max_header_bytes);
    this.uws = uws;
    const { listen, admin } = this.config;
    if (listen.tls) {
      // uWS does not say why a TLS context fails; check the files first so the error names them.
      for (const [what, file] of [['certificate', listen.tls.cert], ['key', listen.tls.key]] as const) {
        try {
          accessSync(file, constants.R_OK);
        } catch {
          throw new Error(`listen.tls: cannot read the ${what} file ${file}`);
        }
      }
    }
    const app = listen.tls
      ? uws.SSLApp({ cert_file_name: listen.tls.cert, key_file_name: listen.tls.key })
      : uws.App();
    this.routes(app);
    const port = await this.listenOn(app, listen.host, listen.port);
    const adminApp = uws.App();
    this.adminRoutes(adminApp);
    const adminPort = await this.listenOn(adminApp, admin.host, admin.port);
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

  private listenOn(app: TemplatedApp, host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      listenExclusive(app, host, port, (socket) => {
        if (!socket) {
          reject(new Error(`cannot listen on ${host}:${port} (in use or not permitted)`));
          return;
        }
        this.sockets.push(socket);
        resolve(this.uws!.us_socket_local_port(socket as never));
      });
    });
  }

  private routes(app: TemplatedApp): void {
    app.post('/v1/chat/completions', (res, req) => this.guard(res, () => new Exchange(this, res, req, 'chat')));
    app.post('/v1/completions', (res, req) => this.guard(res, () => new Exchange(this, res, req, 'completions')));
    const models = (res: HttpResponse, head: boolean) => {
      const created = Math.floor(Date.now() / 1000);
      const data = this.router.models().map((id) => ({ id, object: 'model', created, owned_by: 'infergate' }));
      sendJson(res, '200 OK', JSON.stringify({ object: 'list', data }), head);
    };
    app.get('/v1/models', (res) => models(res, false));
    app.head('/v1/models', (res) => models(res, true));
    const known = new Set(['/v1/chat/completions', '/v1/completions', '/v1/models']);
    app.any('/*', (res, req) => {
      const url = req.getUrl();
      const method = req.getCaseSensitiveMethod();
      const e = known.has(url) ? errors.methodNotAllowed(method, url) : errors.routeNotFound(method, url);
      sendError(res, e, method === 'HEAD');
    });
  }

  /** A bug in one request's handling answers 500 to that request and is logged; it never stops the process. */
  private guard(res: HttpResponse, handle: () => unknown): void {
    try {
      handle();
    } catch (err) {
      this.logger.error({ err }, 'request handler failed');
      try {
        sendError(res, errors.internal());
      } catch {
        // the response was already ended or aborted
      }
    }
  }

  private adminRoutes(app: TemplatedApp): void {
    // Each GET also answers HEAD (load balancers and uptime checks use it): same status, no body.
    const healthz = (res: HttpResponse, head: boolean) => sendJson(res, '200 OK', '{"status":"ok"}', head);
    const readyz = (res: HttpResponse, head: boolean) => {
      const empty = this.router.pools().filter((p) => this.router.endpoints(p).length === 0);
      if (this.draining) sendJson(res, '503 Service Unavailable', '{"status":"draining"}', head);
      else if (empty.length > 0) sendJson(res, '503 Service Unavailable', JSON.stringify({ status: 'not ready', pools_without_endpoints: empty }), head);
      else sendJson(res, '200 OK', '{"status":"ready"}', head);
    };
    const pools = (res: HttpResponse, head: boolean) =>
      sendJson(res, '200 OK', head ? '' : JSON.stringify(this.router.debugPools(Date.now()), null, 2), head);
    for (const [path, handler] of [['/healthz', healthz], ['/readyz', readyz], ['/debug/pools', pools]] as const) {
      app.get(path, (res) => handler(res, false));
      app.head(path, (res) => handler(res, true));
    }
    app.head('/metrics', (res) => {
      res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', this.metrics.registry.contentType).endWithoutBody());
    });
    app.get('/metrics', (res) => {
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      this.metrics.registry.metrics().then(
        (text) => {
          if (aborted) return;
          res.cork(() => {
            res.writeStatus('200 OK').writeHeader('content-type', this.metrics.registry.contentType).end(text);
          });
        },
        (err: unknown) => {
          this.logger.error({ err }, 'metrics collection failed');
          if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
        },
      );
    });
    app.any('/*', (res, req) => {
      const method = req.getCaseSensitiveMethod();
      sendError(res, errors.routeNotFound(method, req.getUrl()), method === 'HEAD');
    });
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
    for (const s of this.sockets) this.uws?.us_listen_socket_close(s);
    this.sockets = [];
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

function hostForUrl(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * A JSON answer; for HEAD the same status and headers without the body, which uWS would otherwise send
 * (and the next answer on the connection would be misread). uWS 20.30: `endWithoutBody()` takes no
 * length here: given one, it never ends the response.
 */
function sendJson(res: HttpResponse, status: string, body: string, head = false): void {
  res.cork(() => {
    res.writeStatus(status).writeHeader('content-type', 'application/json');
    if (head) res.endWithoutBody();
    else res.end(body);
  });
}

function sendError(res: HttpResponse, e: ApiError, head = false): void {
  res.cork(() => {
    res.writeStatus(e.statusText).writeHeader('content-type', 'application/json');
    if (e.retryAfterS !== undefined) res.writeHeader('retry-after', String(e.retryAfterS));
    if (head) res.endWithoutBody();
    else res.end(errorBody(e));
  });
}
