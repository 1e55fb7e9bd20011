/**
 * The gateway's front adapter: the one module that knows uWebSockets.js's request and response objects.
 * It makes an app (HTTP or TLS), registers routes, listens, and turns each request into what the rest of
 * the gateway talks to (client.ts): a POST's head as a ClientRequest and its whole body, a GET's answer
 * (HEAD answered by the same route, without the body), the fallback for every other request.
 *
 * uWS rules kept here: `req` is read only inside the route handler (it is invalid after); onAborted is
 * attached before a handler that answers later returns; onData's ArrayBuffer is copied before the
 * callback returns (uWS reuses its memory); a HEAD answer ends with `endWithoutBody(length of the GET's
 * body)` on uWS 20.57 and with no argument on 20.30 (given a length, 20.30 never ends the response). The response object itself is handed on as the
 * ClientSide it satisfies, so a relayed chunk costs no extra layer.
 */
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadUws, uwsInUse, type Uws } from '../common/uws.js';
import { listenExclusive } from '../common/listen.js';
import { normalizePeer } from '../common/ip.js';
import { EMPTY } from './buffers.js';
import { BodyBudget, BodyCollector } from './body.js';
import { checkTlsFiles } from './tls-files.js';
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
  /** the bytes that request bodies being gathered may hold together (default: no bound) */
  maxBufferedBodyBytes?: number;
  /**
   * Told of each request the front answers itself (GET and HEAD routes, the fallback, refusals before a
   * route), for the access log; the POST routes' exchanges log their own. Must not throw.
   */
  onAnswered?: (facts: FrontFacts, status: number, answer: Answer | undefined) => void;
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

/** The status code of an answer's status line ("404 Not Found" → 404). */
function statusOf(a: Answer): number {
  return parseInt(a.status, 10);
}

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

const UPLOAD_SWEEP_MS = 250;

/** A request body being received: when uWS's timer was last set for it, and the bytes since. */
interface Upload {
  markedAt: number;
  sinceMark: number;
  /** refuse it (408); the front drops the rest */
  tooSlow(): void;
}

/** One listener with its routes. */
export class Front {
  private readonly uws: Uws;
  private readonly app: TemplatedApp;
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
  /** each counted response, with its client's address ('' when not per client): a release counts once */
  private readonly owners = new Map<ClientSide, string>();
  private readonly uploads = new Set<Upload>();
  private uploadSweep: NodeJS.Timeout | undefined;

  constructor(opts: FrontOptions) {
    this.uws = loadUws(opts.maxHeaderBytes);
    headLength = uwsInUse()?.headLength ?? false;
    this.onHandlerError = opts.onHandlerError;
    this.onAnswered = opts.onAnswered;
    this.maxHeaderBytes = opts.maxHeaderBytes;
    this.headTooLarge = opts.headTooLarge ?? { status: '431 Request Header Fields Too Large' };
    this.limits = opts.connections;
    this.bodyBudget = new BodyBudget(opts.maxBufferedBodyBytes ?? Infinity);
    const tls = opts.tls;
    if (tls) {
      // uWS does not say why a TLS context fails; check the files first so the error names them.
      checkTlsFiles(tls.cert, tls.key);
      try {
        this.app = this.uws.SSLApp({ cert_file_name: tls.cert, key_file_name: tls.key });
      } catch (err) {
        throw new Error(`listen.tls: uWS refused the certificate ${tls.cert} or the key ${tls.key} (${(err as Error).message})`);
      }
    } else this.app = this.uws.App();
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
    const onHandlerError = this.onHandlerError;
    const budget = this.bodyBudget;
    const uploads = this.uploads;
    this.app.post(path, (res, req) => {
      if (this.limits !== undefined && !this.admit(res, false, req)) return;
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
        try {
          handler?.onClientAbort();
        } catch (err) {
          handler?.onInternalError(err);
        }
      });
      // read now (req is invalid later), used only if starting the handler fails
      const facts = this.onAnswered ? frontFacts(res, req) : undefined;
      try {
        handler = start(res, request);
      } catch (err) {
        this.release(res);
        try {
          const answer = onHandlerError(err);
          res.cork(() => writeAnswer(res, answer, false));
          this.answered(facts, answer);
        } catch {
          // the response was already ended or aborted
        }
        return;
      }
      if (!handler.wantsBody) return;
      // uWS's slow-upload timer starts now (see UPLOAD_WINDOW_MS)
      upload = {
        markedAt: performance.now(),
        sinceMark: 0,
        tooSlow: () => {
          if (refused) return;
          refused = true;
          collector?.drop();
          collector = undefined;
          try {
            handler!.onBodyTooSlow();
          } catch (err) {
            handler!.onInternalError(err);
          }
        },
      };
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
    });
  }

  /**
   * A GET route that answers HEAD too (load balancers and uptime checks use it): same status and
   * headers, no body. `answer` is told which, and the request's Authorization header (undefined when
   * none); an answer given as a promise (which must not reject) is sent when it settles, unless the
   * client has gone.
   */
  get(path: string, answer: GetAnswer): void {
    const route = (head: boolean) => (res: HttpResponse, req: HttpRequest) => {
      const facts = this.onAnswered ? frontFacts(res, req) : undefined;
      if (this.refusedBeforeRoute(res, req, head, facts)) return;
      this.respond(res, this.answerOf(answer, head, req.getQuery() ?? '', authorizationOf(req)), head, facts);
    };
    this.app.get(path, route(false));
    this.app.head(path, route(true));
  }

  /** Every request no route took, HEAD answered without the body. */
  fallback(answer: (method: string, url: string) => Answer): void {
    this.app.any('/*', (res, req) => {
      const method = req.getCaseSensitiveMethod();
      const facts = this.onAnswered ? frontFacts(res, req) : undefined;
      if (this.refusedBeforeRoute(res, req, method === 'HEAD', facts)) return;
      const url = req.getUrl();
      let a: Answer;
      try {
        a = answer(method, url);
      } catch (err) {
        a = this.onHandlerError(err);
      }
      res.cork(() => writeAnswer(res, a, method === 'HEAD'));
      this.answered(facts, a);
    });
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
    const who = this.owners.get(client);
    if (who === undefined) return;
    this.owners.delete(client);
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
  private admit(res: HttpResponse, head = false, req?: HttpRequest, facts?: FrontFacts): boolean {
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
      res.cork(() => writeAnswer(res, limits.refusal, head, true));
      limits.onRefused(perClient);
      this.answered(f, limits.refusal);
      return false;
    }
    this.open++;
    this.owners.set(res, who ?? '');
    if (who !== undefined) this.perClient.set(who, (this.perClient.get(who) ?? 0) + 1);
    return true;
  }

  /**
   * A GET, HEAD or fallback request refused before its route: beyond the connection bounds (503), or with
   * a head over the header limit (uWS checks it only for a head that spans several reads). Answered here.
   */
  private refusedBeforeRoute(res: HttpResponse, req: HttpRequest, head: boolean, facts?: FrontFacts): boolean {
    if (this.limits !== undefined) {
      if (!this.admit(res, head, req, facts)) return true;
      this.release(res); // answered at once (or, for a promised answer, soon): counted only as a check
    }
    if (headBytes(req) > this.maxHeaderBytes) {
      res.cork(() => writeAnswer(res, this.headTooLarge, head));
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
      const now = performance.now();
      for (const u of this.uploads) {
        if (now - u.markedAt < UPLOAD_WINDOW_MS) continue;
        this.uploads.delete(u);
        u.tooSlow();
      }
    }, UPLOAD_SWEEP_MS);
    timer.unref();
    return timer;
  }

  /** Listens (exclusively: see common/listen.ts) and gives the port, which is chosen when `port` is 0. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, host, port, (socket) => {
        if (!socket) {
          reject(new Error(`cannot listen on ${host}:${port} (in use or not permitted)`));
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
    if (this.socket) this.uws.us_listen_socket_close(this.socket);
    this.socket = undefined;
    this.address = undefined;
    if (this.uploadSweep) clearInterval(this.uploadSweep);
    this.uploadSweep = undefined;
  }

  /** Stops accepting for a while (new connections are refused by the kernel); resumeAccepting undoes it. */
  pauseAccepting(): void {
    if (this.socket) this.uws.us_listen_socket_close(this.socket);
    this.socket = undefined;
  }

  /** Listens again where it listened before pauseAccepting; false if the port cannot be had now. */
  resumeAccepting(): boolean {
    const address = this.address;
    if (address === undefined || this.socket !== undefined) return this.socket !== undefined;
    listenExclusive(this.app, address.host, address.port, (socket) => {
      if (socket) this.socket = socket;
    });
    return this.socket !== undefined;
  }

  /** A route's answer; a route that throws gets onHandlerError's answer instead (the process goes on). */
  private answerOf(answer: GetAnswer, head: boolean, query: string, authorization: string | undefined): Answer | Promise<Answer> {
    try {
      return answer(head, query, authorization);
    } catch (err) {
      return this.onHandlerError(err);
    }
  }

  private respond(res: HttpResponse, answer: Answer | Promise<Answer>, head: boolean, facts?: FrontFacts): void {
    if (!(answer instanceof Promise)) {
      res.cork(() => writeAnswer(res, answer, head));
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
      res.cork(() => writeAnswer(res, a, head));
      this.answered(facts, a);
    };
    answer.then(send, (err: unknown) => send(this.onHandlerError(err)));
  }
}

/** A GET route's answer: told whether the request is a HEAD, its query string and its Authorization header. */
export type GetAnswer = (head: boolean, query: string, authorization: string | undefined) => Answer | Promise<Answer>;

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

function writeAnswer(res: HttpResponse, a: Answer, head: boolean, closeConnection = false): void {
  res.writeStatus(a.status);
  if (a.contentType !== undefined) res.writeHeader('content-type', a.contentType);
  if (a.retryAfterS !== undefined) res.writeHeader('retry-after', String(a.retryAfterS));
  if (a.wwwAuthenticate !== undefined) res.writeHeader('www-authenticate', a.wwwAuthenticate);
  // HEAD: uWS would send a body if given one (and the next answer on the connection would be misread)
  if (head) {
    // (on 20.30 endWithoutBody with any argument never ends the response, so a HEAD answer there has no length)
    if (headLength && a.body) res.endWithoutBody(Buffer.byteLength(a.body)); // a route may leave the body out for HEAD
    else res.endWithoutBody();
  } else res.end(a.body ?? '', closeConnection);
}
