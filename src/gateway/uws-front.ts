/**
 * The gateway's front adapter: the one module that knows uWebSockets.js's request and response objects.
 * It makes an app (HTTP or TLS), registers routes, listens, and turns each request into what the rest of
 * the gateway talks to (client.ts): a POST's head as a ClientRequest and its whole body, a GET's answer
 * (HEAD answered by the same route, without the body), the fallback for every other request (405 with
 * `Allow` on a known path, OPTIONS and CORS preflights answered there), and the CORS headers of every answer
 * it writes itself (cors.ts decides them).
 *
 * uWS rules kept here: `req` is read only inside the route handler (it is invalid after); onAborted is
 * attached before a handler that answers later returns; onData's ArrayBuffer is copied before the
 * callback returns (uWS reuses its memory); a HEAD answer ends with `endWithoutBody(length of the GET's
 * body)` on uWS 20.57 and with no argument on 20.30 (given a length, 20.30 never ends the response). The response object itself is handed on as the
 * ClientSide it satisfies, so a relayed chunk costs no extra layer.
 */
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadUws, uwsInUse, type Uws } from '../common/uws.js';
import { listenExclusive, listenShared } from '../common/listen.js';
import { normalizePeer } from '../common/ip.js';
import { EMPTY } from './buffers.js';
import { BodyBudget, BodyCollector, Upload, Uploads } from './body.js';
import { checkTlsFiles } from '../common/tls-files.js';
import { UPLOAD_MARK_BYTES, UPLOAD_WINDOW_MS, type Answer, type ClientHandler, type ClientRequest, type ClientSide } from './client.js';
import { framingProblem } from './request-checks.js';

export interface FrontOptions {
  /** uWS's header limit, set when it is first loaded (the same for every front of the process) */
  maxHeaderBytes: number;
  /** the answer to a GET, HEAD or fallback request whose head is over maxHeaderBytes (default: 431, no body) */
  headTooLarge?: Answer;
  /** bound the requests in progress on this listener (the client port) */
  connections?: ConnectionLimits;
  /** serve HTTPS with these PEM files */
  tls?: { cert: string; key: string };
  /** A bug in a handler: log it and say what to answer (the process goes on). */
  onHandlerError(err: unknown): Answer;
  /**
   * the bytes that request bodies may hold together (default: no bound): those being gathered here, and
   * those the owner's requests still hold after they were handed on (see GatewayContext.bodies)
   */
  bodyBudget?: BodyBudget;
  /** cross-origin access (cors.ts): the headers every answer carries for its Origin, and preflights */
  cors?: CorsPolicy;
  /**
   * Told of each request the front answers itself (GET and HEAD routes, the fallback, refusals before a
   * route), for the access log; the POST routes' exchanges log their own. Must not throw.
   */
  onAnswered?: (facts: FrontFacts, status: number, answer: Answer | undefined) => void;
  /**
   * Listen sharing the port (SO_REUSEPORT) without taking it exclusively first: a worker of
   * `serve --workers N`, whose parent checked that no other process holds the port (gateway/workers.ts).
   */
  joinShared?: boolean;
}

/** What the access log needs of a request the front answered, read while its handler ran. */
export interface FrontFacts {
  method: string;
  url: string;
  peer: string;
  /** the headers the log reads ('' when absent) */
  xForwardedFor: string;
  requestId: string;
  traceparent: string;
  /** performance.now() when the handler began */
  started: number;
  /** the front cut the connection without an answer */
  cut?: boolean;
}

function frontFacts(res: HttpResponse, req: HttpRequest): FrontFacts {
  return {
    method: req.getCaseSensitiveMethod().toUpperCase(),
    url: req.getUrl(),
    peer: normalizePeer(Buffer.from(res.getRemoteAddressAsText()).toString('latin1')),
    xForwardedFor: req.getHeader('x-forwarded-for'),
    requestId: req.getHeader('x-request-id'),
    traceparent: req.getHeader('traceparent'),
    started: performance.now(),
  };
}

/** frontFacts, or undefined when the response is already closed (uWS throws on reading a closed one). */
function factsIfOpen(res: HttpResponse, req: HttpRequest): FrontFacts | undefined {
  try {
    return frontFacts(res, req);
  } catch {
    return undefined;
  }
}

/** The status code of an answer's status line ("404 Not Found" → 404). */
function statusOf(a: Answer): number {
  return parseInt(a.status, 10);
}

/** What the front asks of the CORS policy (cors.ts). */
export interface CorsPolicy {
  /** the CORS headers of an answer to a request with this Origin ('' when none) */
  actual(origin: string): ReadonlyArray<readonly [string, string]>;
  /** the answer to a preflight for a path that allows `methods`, asking for `requestHeaders` */
  preflight(origin: string, methods: string, requestHeaders: string): Answer;
}

/** The fallback's view of a request no route took: its method, its path, and the path's methods if it is known. */
export type FallbackAnswer = (method: string, url: string, allow: string | undefined) => Answer;

/**
 * A registered path and its methods (for 405 and OPTIONS); a path ending in `/*` matches what it starts,
 * one with `:name` segments (uWS's parameters) any path with one non-empty segment in each.
 */
interface RouteEntry {
  path: string;
  prefix: string | undefined;
  pattern: RegExp | undefined;
  methods: string[];
}

/** The paths a route with `:name` segments matches, as a RegExp (undefined for a path without any). */
function paramPattern(path: string): RegExp | undefined {
  if (!path.includes('/:')) return undefined;
  const parts = path.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${parts.join('/')}$`);
}

const NO_HEADERS_LIST: ReadonlyArray<readonly [string, string]> = [];

/**
 * Requests in progress on a listener, in all and per client address. uWS 20.30 tells JavaScript nothing
 * about a connection until its first request, nor when a kept-alive connection closes after its answer,
 * so what is counted is connections with a request in progress (one request at a time on each: uWS
 * does not serve pipelined requests); idle ones are closed by uWS itself about 10 s after their last
 * answer.
 */
export interface ConnectionLimits {
  max: number;
  /** 0: no bound per client */
  perClient: number;
  /** the answer to a request beyond a bound (sent with `Connection: close`) */
  refusal: Answer;
  /** told of each refusal, with whether the client's own bound was the one reached */
  onRefused(perClient: boolean): void;
}

/**
 * A counted response (admit) carries its client's address ('' when not per client) under this key until
 * it is released, so that a release counts once. A property of the response object itself, which dies
 * with the request, rather than an entry in a listener-wide Map: such a Map's table is reallocated as the
 * load rises and falls, and those tables lived long enough to reach the old generation (about 95 bytes per
 * request, measured with V8's sampling heap profiler).
 */
const COUNTED_FOR = Symbol('infergate.countedFor');
type Counted = ClientSide & { [COUNTED_FOR]?: string | undefined };

const UPLOAD_SWEEP_MS = 250;
/** how long a certificate reload keeps the replaced listening socket open (see retireSoon) */
const RETIRE_MS = 200;

/** One listener with its routes. */
export class Front {
  private readonly uws: Uws;
  private app: TemplatedApp;
  /** the apps a certificate reload replaced: their connections are served to their end (uWS frees an app's
   *  connections with it, so they are kept, one small object per reload) */
  private readonly retired: TemplatedApp[] = [];
  /** listening sockets of replaced apps, closed shortly after the reload (retireSoon) */
  private readonly retiring = new Set<us_listen_socket>();
  /** every route, to register again on the app a certificate reload makes */
  private readonly routes: Array<(app: TemplatedApp) => void> = [];
  /** a TLS front listens sharing its port (SO_REUSEPORT) so that a reloaded app can listen beside it */
  private readonly shared: boolean;
  /** a worker of `serve --workers N`: listens shared, without the exclusive probe (its siblings hold the port) */
  private readonly joinShared: boolean;
  private readonly onHandlerError: (err: unknown) => Answer;
  private readonly onAnswered: FrontOptions['onAnswered'];
  private socket: us_listen_socket | undefined;
  /** where it listens once it does (to listen again after pauseAccepting) */
  private address: { host: string; port: number } | undefined;
  /** what the bodies being gathered on this listener hold */
  readonly bodyBudget: BodyBudget;
  private readonly maxHeaderBytes: number;
  private readonly headTooLarge: Answer;
  private readonly limits: ConnectionLimits | undefined;
  /** requests in progress (counted only when limits are set) */
  private open = 0;
  /** requests in progress per client address (when limits.perClient is set) */
  private readonly perClient = new Map<string, number>();
  private readonly uploads = new Uploads();
  private uploadSweep: NodeJS.Timeout | undefined;
  private readonly cors: CorsPolicy | undefined;
  /** every route's path and methods, in registration order */
  private readonly routeTable: RouteEntry[] = [];

  constructor(opts: FrontOptions) {
    this.uws = loadUws(opts.maxHeaderBytes);
    headLength = uwsInUse()?.headLength ?? false;
    this.onHandlerError = opts.onHandlerError;
    this.onAnswered = opts.onAnswered;
    this.maxHeaderBytes = opts.maxHeaderBytes;
    this.headTooLarge = opts.headTooLarge ?? { status: '431 Request Header Fields Too Large' };
    this.limits = opts.connections;
    this.cors = opts.cors;
    this.bodyBudget = opts.bodyBudget ?? new BodyBudget(Infinity);
    this.shared = opts.tls !== undefined;
    this.joinShared = opts.joinShared === true;
    this.app = opts.tls ? this.sslApp(opts.tls) : this.uws.App();
  }

  private sslApp(tls: { cert: string; key: string }): TemplatedApp {
    // uWS does not say why a TLS context fails; check the files first so the error names them.
    checkTlsFiles(tls.cert, tls.key);
    try {
      return this.uws.SSLApp({ cert_file_name: tls.cert, key_file_name: tls.key });
    } catch (err) {
      throw new Error(`listen.tls: uWS refused the certificate ${tls.cert} or the key ${tls.key} (${(err as Error).message})`);
    }
  }

  /** Registers a route on the app now and remembers it for the app a certificate reload makes. */
  private route(install: (app: TemplatedApp) => void): void {
    this.routes.push(install);
    install(this.app);
  }

  /**
   * Serves new connections with this certificate and key (a TLS front only): a new app with the same
   * routes listens on the same port beside the current one, whose listening socket is then closed.
   * Connections already open stay on the app that accepted them until they end. Throws, changing
   * nothing, when the files are not a usable pair or the new app cannot listen. Resolves once the old
   * listening socket is closed, i.e. once every new connection gets the new pair.
   */
  reloadTls(tls: { cert: string; key: string }): Promise<void> {
    if (!this.shared) throw new Error('reloadTls: this listener does not serve TLS');
    const app = this.sslApp(tls);
    for (const install of this.routes) install(app);
    const address = this.address;
    const old = this.socket;
    if (old !== undefined && address !== undefined) {
      let socket: us_listen_socket | undefined;
      listenShared(app, address.host, address.port, (s) => {
        if (s) socket = s;
      });
      if (socket === undefined) throw new Error(`listen.tls: the new certificate's listener could not join ${address.host}:${address.port}`);
      this.socket = socket;
    }
    this.retired.push(this.app);
    this.app = app;
    if (old === undefined || address === undefined) return Promise.resolve();
    return new Promise((resolve) => this.retireSoon(old, resolve));
  }

  /**
   * Closes a replaced listening socket after RETIRE_MS. The kernel spreads new connections over both
   * sockets meanwhile; the old app accepts what reached its queue (while the new context was being made,
   * the loop accepted nothing), where closing at once would reset those connections.
   */
  private retireSoon(socket: us_listen_socket, closed: () => void): void {
    this.retiring.add(socket);
    setTimeout(() => {
      if (this.retiring.delete(socket)) this.uws.us_listen_socket_close(socket);
      closed(); // closed here, or already by close()
    }, RETIRE_MS).unref();
  }

  /** Listens on the address exclusively (plain HTTP) or shared with this process's next app (TLS). */
  private listenOn(host: string, port: number, cb: (socket: us_listen_socket | false) => void): void {
    if (this.shared || this.joinShared) listenShared(this.app, host, port, cb);
    else listenExclusive(this.app, host, port, cb);
  }

  /**
   * A POST route: `start` gets the client and the request's head and returns who handles the rest; the
   * body is read only if that handler wants it, and goes to it whole, or as "too large" the moment it
   * passes `maxBodyBytes`, or as "busy" when the listener's bodies together would pass their budget (what
   * still arrives is dropped as it comes, never kept; see body.ts). A handler that throws
   * while starting is answered with onHandlerError's answer; one that throws later goes to its own
   * onInternalError.
   */
  post(path: string, maxBodyBytes: number, start: (client: ClientSide, req: ClientRequest) => ClientHandler): void {
    const budget = this.bodyBudget;
    const uploads = this.uploads;
    this.addRoute(path, ['POST']);
    this.route((app) => app.post(path, (res, req) => {
      const extra = this.corsOf(req);
      if (this.limits !== undefined && !this.admit(res, false, extra, req)) return;
      const request = requestHead(req, res);
      let handler: ClientHandler | undefined;
      // made for a body in several chunks; undefined again once the body is handed on or refused
      let collector: BodyCollector | undefined;
      let refused = false;
      let upload: Upload | undefined;
      res.onAborted(() => {
        collector?.drop(); // a half-sent body's memory goes back at once
        collector = undefined;
        if (upload) uploads.delete(upload);
        tellAborted(handler);
      });
      handler = this.started(res, req, request, start, extra);
      if (handler === undefined || !handler.wantsBody) return;
      // uWS's slow-upload timer starts now (see UPLOAD_WINDOW_MS)
      upload = new Upload(performance.now(), () => {
        if (refused) return;
        refused = true;
        collector?.drop();
        collector = undefined;
        try {
          handler!.onBodyTooSlow();
        } catch (err) {
          handler!.onInternalError(err);
        }
      });
      uploads.add(upload);
      this.uploadSweep ??= this.startUploadSweep();
      res.onData((ab, isLast) => {
        if (refused) return; // what still arrives is dropped as it comes
        if (!handler!.wantsBody) {
          // answered while the body was arriving (a token refused meanwhile): the rest is dropped too
          refused = true;
          uploads.delete(upload);
          collector?.drop();
          collector = undefined;
          return;
        }
        if (isLast) uploads.delete(upload);
        else {
          upload.sinceMark += ab.byteLength;
          if (upload.sinceMark >= UPLOAD_MARK_BYTES) {
            upload.markedAt = performance.now();
            upload.sinceMark = 0;
          }
        }
        try {
          if (collector === undefined && isLast) {
            // the usual case, a body in one chunk: copied once, into Node's buffer pool when small
            if (ab.byteLength > maxBodyBytes) {
              refused = true;
              handler!.onBodyTooLarge();
            } else handler!.onBody(ab.byteLength > 0 ? Buffer.from(new Uint8Array(ab)) : EMPTY);
            return;
          }
          collector ??= new BodyCollector(maxBodyBytes, budget);
          // copied now: uWS reuses the chunk's memory after this callback
          const added = collector.add(new Uint8Array(ab));
          if (added !== 'ok') {
            refused = true;
            uploads.delete(upload);
            collector = undefined;
            if (added === 'too_large') handler!.onBodyTooLarge();
            else handler!.onBodyBudgetExceeded();
            return;
          }
          if (!isLast) return;
          const body = collector.take();
          collector = undefined;
          handler!.onBody(body);
        } catch (err) {
          // nothing thrown in a uWS callback may reach the process: this request answers for it
          refused = true;
          uploads.delete(upload);
          collector?.drop();
          collector = undefined;
          handler!.onInternalError(err);
        }
      });
    }));
  }

  /**
   * The handler `start` makes for a request, or undefined when it threw: then the request is answered with
   * onHandlerError's answer here. Runs inside the route handler (`req` is still valid).
   */
  private started(
    res: HttpResponse,
    req: HttpRequest,
    request: ClientRequest,
    start: (client: ClientSide, req: ClientRequest) => ClientHandler,
    extra: ReadonlyArray<readonly [string, string]>,
  ): ClientHandler | undefined {
    try {
      return start(res, request);
    } catch (err) {
      // read only on this path, so a request that starts costs no second look at its head
      const facts = this.onAnswered ? factsIfOpen(res, req) : undefined;
      this.release(res);
      try {
        const answer = this.onHandlerError(err);
        res.cork(() => writeAnswer(res, answer, false, false, extra));
        this.answered(facts, answer);
      } catch {
        // the response was already ended or aborted
      }
      return undefined;
    }
  }

  /**
   * A GET route whose answer is relayed from a model server as a POST route's is (a call on a stored
   * Responses API answer): `start` gets the client and the request's head and returns who handles the
   * rest, which is handed an empty body at once (a GET's body is never read). HEAD is not served here: the
   * fallback answers it 405. Errors are handled as on `post`.
   */
  relayedGet(path: string, start: (client: ClientSide, req: ClientRequest) => ClientHandler): void {
    this.addRoute(path, ['GET']);
    this.route((app) => app.get(path, (res, req) => {
      const extra = this.corsOf(req);
      if (this.limits !== undefined && !this.admit(res, false, extra, req)) return;
      const request = requestHead(req, res);
      let handler: ClientHandler | undefined;
      res.onAborted(() => tellAborted(handler));
      handler = this.started(res, req, request, start, extra);
      if (handler === undefined || !handler.wantsBody) return;
      try {
        handler.onBody(EMPTY);
      } catch (err) {
        handler.onInternalError(err); // nothing thrown in a uWS callback may reach the process
      }
    }));
  }

  /**
   * A GET route that answers HEAD too (load balancers and uptime checks use it): same status and
   * headers, no body. `answer` is told which, and the request's Authorization header (undefined when
   * none); an answer given as a promise (which must not reject) is sent when it settles, unless the
   * client has gone.
   */
  get(path: string, answer: GetAnswer): void {
    this.addRoute(path, ['GET', 'HEAD']);
    const route = (head: boolean) => (res: HttpResponse, req: HttpRequest) => {
      const extra = this.corsOf(req);
      const facts = this.onAnswered ? frontFacts(res, req) : undefined;
      if (this.refusedBeforeRoute(res, req, head, extra, facts)) return;
      this.respond(res, this.answerOf(answer, head, req.getQuery() ?? '', authorizationOf(req), req.getUrl()), head, extra, facts);
    };
    this.route((app) => app.get(path, route(false)).head(path, route(true)));
  }

  /**
   * Every request no route took, HEAD answered without the body. On a known path (one a route was
   * registered for, with other methods) OPTIONS is answered here: a CORS preflight (an `Origin` and an
   * `Access-Control-Request-Method`, with a CORS policy) as the policy says, any other OPTIONS 204 with
   * `Allow` (RFC 9110 §9.3.7). Any other method goes to `answer`, told the path's methods, and its
   * answer carries them as `Allow` (a 405).
   */
  fallback(answer: FallbackAnswer): void {
    this.route((app) => app.any('/*', (res, req) => {
      const method = req.getCaseSensitiveMethod();
      const extra = this.corsOf(req);
      const facts = this.onAnswered ? frontFacts(res, req) : undefined;
      if (this.refusedBeforeRoute(res, req, method === 'HEAD', extra, facts)) return;
      const url = req.getUrl();
      const methods = this.methodsOf(url);
      const allow = methods === undefined ? undefined : `${methods}, OPTIONS`;
      let a: Answer;
      try {
        if (method === 'OPTIONS' && allow !== undefined) {
          const origin = this.cors === undefined ? '' : req.getHeader('origin');
          const requested = origin === '' ? '' : req.getHeader('access-control-request-method');
          if (requested !== '') {
            writeAnswerCorked(res, this.cors!.preflight(origin, allow, req.getHeader('access-control-request-headers')), false, NO_HEADERS_LIST, allow);
            return;
          }
          a = { status: '204 No Content' };
        } else a = answer(method, url, allow);
      } catch (err) {
        a = this.onHandlerError(err);
      }
      writeAnswerCorked(res, a, method === 'HEAD', extra, allow);
      this.answered(facts, a);
    }));
  }

  /** Records a route's methods (for 405 and OPTIONS). */
  private addRoute(path: string, methods: string[]): void {
    const known = this.routeTable.find((r) => r.path === path);
    if (known) {
      for (const m of methods) if (!known.methods.includes(m)) known.methods.push(m);
      return;
    }
    this.routeTable.push({ path, prefix: path.endsWith('/*') ? path.slice(0, -1) : undefined, pattern: paramPattern(path), methods: [...methods] });
  }

  /** The methods of the routes for `url` ("GET, HEAD"), or undefined when no route has that path. */
  private methodsOf(url: string): string | undefined {
    const methods: string[] = [];
    for (const r of this.routeTable) {
      if (r.pattern !== undefined ? !r.pattern.test(url) : r.prefix === undefined ? url !== r.path : !url.startsWith(r.prefix)) continue;
      for (const m of r.methods) if (!methods.includes(m)) methods.push(m);
    }
    return methods.length > 0 ? methods.join(', ') : undefined;
  }

  /** The CORS headers of this request's answer (none without a CORS policy). Read while `req` is valid. */
  private corsOf(req: HttpRequest): ReadonlyArray<readonly [string, string]> {
    return this.cors === undefined ? NO_HEADERS_LIST : this.cors.actual(req.getHeader('origin'));
  }

  /** Tells onAnswered (when set and the request's facts were read) of an answer the front gave. */
  private answered(facts: FrontFacts | undefined, a: Answer | undefined, status = a ? statusOf(a) : 0): void {
    if (facts === undefined || this.onAnswered === undefined) return;
    try {
      this.onAnswered(facts, status, a);
    } catch {
      // logging must never reach uWS's callback
    }
  }

  /** Requests in progress on this listener (counted when it has connection limits). */
  get openConnections(): number {
    return this.open;
  }

  /** The request answered on `client` is over: its connection no longer counts (once per admitted request). */
  release(client: ClientSide): void {
    const counted = client as Counted;
    const who = counted[COUNTED_FOR];
    if (who === undefined) return;
    counted[COUNTED_FOR] = undefined;
    this.open--;
    if (who === '') return;
    const n = (this.perClient.get(who) ?? 1) - 1;
    if (n > 0) this.perClient.set(who, n);
    else this.perClient.delete(who);
  }

  /**
   * Counts the request about to be handled on `res`, or answers it 503 with `Connection: close` when a
   * bound is reached (false). A refusal costs one small write; the closed connection frees its descriptor.
   */
  private admit(res: HttpResponse, head = false, extra = NO_HEADERS_LIST, req?: HttpRequest, facts?: FrontFacts): boolean {
    const limits = this.limits!;
    let who: string | undefined;
    let refused = this.open >= limits.max;
    let perClient = false;
    if (!refused && limits.perClient > 0) {
      who = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
      perClient = (this.perClient.get(who) ?? 0) >= limits.perClient;
      refused = perClient;
    }
    if (refused) {
      const f = facts ?? (this.onAnswered && req ? frontFacts(res, req) : undefined);
      res.cork(() => writeAnswer(res, limits.refusal, head, true, extra));
      limits.onRefused(perClient);
      this.answered(f, limits.refusal);
      return false;
    }
    this.open++;
    (res as Counted)[COUNTED_FOR] = who ?? '';
    if (who !== undefined) this.perClient.set(who, (this.perClient.get(who) ?? 0) + 1);
    return true;
  }

  /**
   * A GET, HEAD or fallback request refused before its route: beyond the connection bounds (503), or with
   * a head over the header limit (uWS checks it only for a head that spans several reads). Answered here.
   */
  private refusedBeforeRoute(
    res: HttpResponse,
    req: HttpRequest,
    head: boolean,
    extra: ReadonlyArray<readonly [string, string]> = NO_HEADERS_LIST,
    facts?: FrontFacts,
  ): boolean {
    if (this.limits !== undefined) {
      if (!this.admit(res, head, extra, req, facts)) return true;
      this.release(res); // answered at once (or, for a promised answer, soon): counted only as a check
    }
    if (headBytes(req) > this.maxHeaderBytes) {
      res.cork(() => writeAnswer(res, this.headTooLarge, head, false, extra));
      this.answered(facts, this.headTooLarge);
      return true;
    }
    // Framing two parsers could read differently: as on the POST routes, the connection is cut without an
    // answer, or uWS would read the bytes after this head as a further request and serve it (smuggling).
    if (framingFacts(req) !== undefined) {
      res.close();
      if (facts) facts.cut = true;
      this.answered(facts, undefined, 400);
      return true;
    }
    return false;
  }

  /** Every UPLOAD_SWEEP_MS while bodies are under way: refuse those uWS would soon cut (see UPLOAD_WINDOW_MS). */
  private startUploadSweep(): NodeJS.Timeout {
    const timer = setInterval(() => {
      if (this.uploads.size === 0) {
        clearInterval(timer);
        this.uploadSweep = undefined;
        return;
      }
      for (const u of this.uploads.takeMarkedBefore(performance.now() - UPLOAD_WINDOW_MS)) u.tooSlow();
    }, UPLOAD_SWEEP_MS);
    timer.unref();
    return timer;
  }

  /**
   * Listens (exclusively: see common/listen.ts) and gives the port, which is chosen when `port` is 0. A TLS
   * front first takes the port exclusively (so a port another process holds is refused, and port 0 gets its
   * number), then listens on it shared, which a certificate reload needs.
   */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const refused = () => reject(new Error(`cannot listen on ${host}:${port} (in use or not permitted)`));
      if (this.shared && !this.joinShared) {
        let probe: us_listen_socket | undefined;
        listenExclusive(this.app, host, port, (s) => {
          if (s) probe = s;
        });
        if (probe === undefined) return refused();
        port = this.uws.us_socket_local_port(probe as never);
        this.uws.us_listen_socket_close(probe);
      }
      this.listenOn(host, port, (socket) => {
        if (!socket) {
          refused();
          return;
        }
        this.socket = socket;
        const bound = this.uws.us_socket_local_port(socket as never);
        this.address = { host, port: bound };
        resolve(bound);
      });
    });
  }

  /** Stops accepting connections (open ones are served to their end). */
  close(): void {
    for (const s of this.retiring) this.uws.us_listen_socket_close(s);
    this.retiring.clear();
    if (this.socket) this.uws.us_listen_socket_close(this.socket);
    this.socket = undefined;
    this.address = undefined;
    if (this.uploadSweep) clearInterval(this.uploadSweep);
    this.uploadSweep = undefined;
  }

  /** Stops accepting for a while (new connections are refused by the kernel); resumeAccepting undoes it. */
  pauseAccepting(): void {
    for (const s of this.retiring) this.uws.us_listen_socket_close(s);
    this.retiring.clear();
    if (this.socket) this.uws.us_listen_socket_close(this.socket);
    this.socket = undefined;
  }

  /** Listens again where it listened before pauseAccepting; false if the port cannot be had now. */
  resumeAccepting(): boolean {
    const address = this.address;
    if (address === undefined || this.socket !== undefined) return this.socket !== undefined;
    this.listenOn(address.host, address.port, (socket) => {
      if (socket) this.socket = socket;
    });
    return this.socket !== undefined;
  }

  /** A route's answer; a route that throws gets onHandlerError's answer instead (the process goes on). */
  private answerOf(answer: GetAnswer, head: boolean, query: string, authorization: string | undefined, url: string): Answer | Promise<Answer> {
    try {
      return answer(head, query, authorization, url);
    } catch (err) {
      return this.onHandlerError(err);
    }
  }

  private respond(
    res: HttpResponse,
    answer: Answer | Promise<Answer>,
    head: boolean,
    extra: ReadonlyArray<readonly [string, string]>,
    facts?: FrontFacts,
  ): void {
    if (!(answer instanceof Promise)) {
      res.cork(() => writeAnswer(res, answer, head, false, extra));
      this.answered(facts, answer);
      return;
    }
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
      this.answered(facts, undefined, 499); // the client left before the answer
    });
    const send = (a: Answer) => {
      if (aborted) return;
      res.cork(() => writeAnswer(res, a, head, false, extra));
      this.answered(facts, a);
    };
    answer.then(send, (err: unknown) => send(this.onHandlerError(err)));
  }
}

/**
 * A GET route's answer: told whether the request is a HEAD, its query string, its Authorization header
 * and its path (as sent: not percent-decoded).
 */
export type GetAnswer = (head: boolean, query: string, authorization: string | undefined, url: string) => Answer | Promise<Answer>;

/** The client hung up: tell its handler (nothing thrown in a uWS callback may reach the process). */
function tellAborted(handler: ClientHandler | undefined): void {
  try {
    handler?.onClientAbort();
  } catch (err) {
    handler?.onInternalError(err);
  }
}

function authorizationOf(req: HttpRequest): string | undefined {
  const v = req.getHeader('authorization');
  return v === '' ? undefined : v;
}

/** The target of collectHeader while one request's headers are read (a closure per request avoided). */
let collecting: string[] = [];
const NO_HEADERS: string[] = [];

function collectHeader(key: string, value: string): void {
  collecting.push(key, value);
}

let headSize = 0;
function countHeader(key: string, value: string): void {
  headSize += key.length + value.length + 4;
}

/** A GET's head size as request-checks counts a POST's (request line and header lines). */
function headBytes(req: HttpRequest): number {
  headSize = req.getMethod().length + req.getUrl().length + (req.getQuery()?.length ?? 0) + 12;
  req.forEach(countHeader);
  return headSize;
}

let framingLength: string | undefined;
let framingTwoLengths = false;
let framingCoding: string | undefined;
function framingHeader(key: string, value: string): void {
  if (key === 'content-length') {
    if (framingLength === undefined) framingLength = value;
    else if (framingLength !== value) framingTwoLengths = true;
  } else if (key === 'transfer-encoding') framingCoding = framingCoding === undefined ? value : `${framingCoding}, ${value}`;
}

/** Why a GET, HEAD or fallback request's framing could be read two ways (request-checks' rule), or undefined. */
function framingFacts(req: HttpRequest): string | undefined {
  framingLength = framingCoding = undefined;
  framingTwoLengths = false;
  req.forEach(framingHeader);
  return framingTwoLengths ? 'two different Content-Length headers' : framingProblem(framingLength, framingCoding);
}

function requestHead(req: HttpRequest, res: HttpResponse): ClientRequest {
  const headers: string[] = [];
  collecting = headers;
  req.forEach(collectHeader);
  collecting = NO_HEADERS;
  const peer = normalizePeer(Buffer.from(res.getRemoteAddressAsText()).toString('latin1'));
  return { method: req.getMethod(), url: req.getUrl(), query: req.getQuery() ?? '', headers, peer };
}

/** Whether the uWS build in use can give a HEAD answer the GET's Content-Length (20.57 can, 20.30 cannot). */
let headLength = false;

/** A fallback's answer, with `Allow` when the path is known. */
function writeAnswerCorked(res: HttpResponse, a: Answer, head: boolean, extra: ReadonlyArray<readonly [string, string]>, allow: string | undefined): void {
  const lines = allow === undefined ? extra : [['allow', allow] as const, ...extra];
  // a 204 has no body, nor a Content-Length (RFC 9110 §8.6)
  res.cork(() => writeAnswer(res, a, head || a.status.startsWith('204'), false, lines));
}

function writeAnswer(res: HttpResponse, a: Answer, head: boolean, closeConnection = false, extra = NO_HEADERS_LIST): void {
  res.writeStatus(a.status);
  if (a.contentType !== undefined) res.writeHeader('content-type', a.contentType);
  if (a.retryAfterS !== undefined) res.writeHeader('retry-after', String(a.retryAfterS));
  if (a.wwwAuthenticate !== undefined) res.writeHeader('www-authenticate', a.wwwAuthenticate);
  if (a.headers !== undefined) for (const [k, v] of a.headers) res.writeHeader(k, v);
  for (const [k, v] of extra) res.writeHeader(k, v);
  // HEAD: uWS would send a body if given one (and the next answer on the connection would be misread)
  if (head) {
    // (on 20.30 endWithoutBody with any argument never ends the response, so a HEAD answer there has no length)
    if (headLength && a.body) res.endWithoutBody(Buffer.byteLength(a.body)); // a route may leave the body out for HEAD
    else res.endWithoutBody();
  } else res.end(a.body ?? '', closeConnection);
}
