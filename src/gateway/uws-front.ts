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
import { accessSync, constants } from 'node:fs';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadUws, uwsInUse, type Uws } from '../common/uws.js';
import { listenExclusive } from '../common/listen.js';
import { EMPTY } from './buffers.js';
import { BodyBudget, BodyCollector } from './body.js';
import type { Answer, ClientHandler, ClientRequest, ClientSide } from './client.js';

export interface FrontOptions {
  /** uWS's header limit, set when it is first loaded (the same for every front of the process) */
  maxHeaderBytes: number;
  /** serve HTTPS with these PEM files */
  tls?: { cert: string; key: string };
  /** A bug in a handler: log it and say what to answer (the process goes on). */
  onHandlerError(err: unknown): Answer;
  /** the bytes that request bodies being gathered may hold together (default: no bound) */
  maxBufferedBodyBytes?: number;
}

/** One listener with its routes. */
export class Front {
  private readonly uws: Uws;
  private readonly app: TemplatedApp;
  private readonly onHandlerError: (err: unknown) => Answer;
  private socket: us_listen_socket | undefined;
  /** what the bodies being gathered on this listener hold */
  readonly bodyBudget: BodyBudget;

  constructor(opts: FrontOptions) {
    this.uws = loadUws(opts.maxHeaderBytes);
    headLength = uwsInUse()?.headLength ?? false;
    this.onHandlerError = opts.onHandlerError;
    this.bodyBudget = new BodyBudget(opts.maxBufferedBodyBytes ?? Infinity);
    const tls = opts.tls;
    if (tls) {
      // uWS does not say why a TLS context fails; check the files first so the error names them.
      for (const [what, file] of [['certificate', tls.cert], ['key', tls.key]] as const) {
        try {
          accessSync(file, constants.R_OK);
        } catch {
          throw new Error(`listen.tls: cannot read the ${what} file ${file}`);
        }
      }
    }
    this.app = tls ? this.uws.SSLApp({ cert_file_name: tls.cert, key_file_name: tls.key }) : this.uws.App();
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
    this.app.post(path, (res, req) => {
      const request = requestHead(req);
      let handler: ClientHandler | undefined;
      // made for a body in several chunks; undefined again once the body is handed on or refused
      let collector: BodyCollector | undefined;
      let refused = false;
      res.onAborted(() => {
        collector?.drop(); // a half-sent body's memory goes back at once
        collector = undefined;
        try {
          handler?.onClientAbort();
        } catch (err) {
          handler?.onInternalError(err);
        }
      });
      try {
        handler = start(res, request);
      } catch (err) {
        try {
          const answer = onHandlerError(err);
          res.cork(() => writeAnswer(res, answer, false));
        } catch {
          // the response was already ended or aborted
        }
        return;
      }
      if (!handler.wantsBody) return;
      res.onData((ab, isLast) => {
        if (refused) return; // what still arrives is dropped as it comes
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
          collector?.drop();
          collector = undefined;
          handler!.onInternalError(err);
        }
      });
    });
  }

  /**
   * A GET route that answers HEAD too (load balancers and uptime checks use it): same status and
   * headers, no body. `answer` is told which; an answer given as a promise (which must not reject) is
   * sent when it settles, unless the client has gone.
   */
  get(path: string, answer: (head: boolean) => Answer | Promise<Answer>): void {
    this.app.get(path, (res) => this.respond(res, this.answerOf(answer, false), false));
    this.app.head(path, (res) => this.respond(res, this.answerOf(answer, true), true));
  }

  /** Every request no route took, HEAD answered without the body. */
  fallback(answer: (method: string, url: string) => Answer): void {
    this.app.any('/*', (res, req) => {
      const url = req.getUrl();
      const method = req.getCaseSensitiveMethod();
      let a: Answer;
      try {
        a = answer(method, url);
      } catch (err) {
        a = this.onHandlerError(err);
      }
      res.cork(() => writeAnswer(res, a, method === 'HEAD'));
    });
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
        resolve(this.uws.us_socket_local_port(socket as never));
      });
    });
  }

  /** Stops accepting connections (open ones are served to their end). */
  close(): void {
    if (this.socket) this.uws.us_listen_socket_close(this.socket);
    this.socket = undefined;
  }

  /** A route's answer; a route that throws gets onHandlerError's answer instead (the process goes on). */
  private answerOf(answer: (head: boolean) => Answer | Promise<Answer>, head: boolean): Answer | Promise<Answer> {
    try {
      return answer(head);
    } catch (err) {
      return this.onHandlerError(err);
    }
  }

  private respond(res: HttpResponse, answer: Answer | Promise<Answer>, head: boolean): void {
    if (!(answer instanceof Promise)) {
      res.cork(() => writeAnswer(res, answer, head));
      return;
    }
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    answer.then(
      (a) => {
        if (!aborted) res.cork(() => writeAnswer(res, a, head));
      },
      (err: unknown) => {
        const a = this.onHandlerError(err);
        if (!aborted) res.cork(() => writeAnswer(res, a, head));
      },
    );
  }
}

/** The target of collectHeader while one request's headers are read (a closure per request avoided). */
let collecting: string[] = [];
const NO_HEADERS: string[] = [];

function collectHeader(key: string, value: string): void {
  collecting.push(key, value);
}

function requestHead(req: HttpRequest): ClientRequest {
  const headers: string[] = [];
  collecting = headers;
  req.forEach(collectHeader);
  collecting = NO_HEADERS;
  return { method: req.getMethod(), url: req.getUrl(), query: req.getQuery() ?? '', headers };
}

/** Whether the uWS build in use can give a HEAD answer the GET's Content-Length (20.57 can, 20.30 cannot). */
let headLength = false;

function writeAnswer(res: HttpResponse, a: Answer, head: boolean): void {
  res.writeStatus(a.status);
  if (a.contentType !== undefined) res.writeHeader('content-type', a.contentType);
  if (a.retryAfterS !== undefined) res.writeHeader('retry-after', String(a.retryAfterS));
  // HEAD: uWS would send a body if given one (and the next answer on the connection would be misread)
  if (head) {
    if (headLength && a.body) res.endWithoutBody(Buffer.byteLength(a.body)); // a route may leave the body out for HEAD
    else res.endWithoutBody();
  } else if (a.body !== undefined) res.end(a.body);
  else res.end();
}
