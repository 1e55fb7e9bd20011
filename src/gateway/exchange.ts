/**
 * One client request through the gateway: read the body within its limit, parse it once, route it,
 * relay it to the chosen endpoint with undici's dispatch API, and stream the answer back with
 * backpressure both ways. Retries go to another endpoint while nothing has reached the client.
 *
 * uWS rules kept here: `req` is read only in the constructor (synchronously, inside the route handler);
 * onAborted is attached before the handler returns; every write after the first tick is inside
 * `res.cork`; one onWritable per response; `res` is never touched after abort or end; `end(…, true)`
 * (close the connection) only before any `write` (uWS 20.30 would put `Connection: close` inside the body).
 */
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Dispatcher } from 'undici';
import { renderPrompt } from '../openai/prompt.js';
import { estimateTokens } from '../openai/tokens.js';
import { bodyProblem, problemMessage, type ApiKind } from '../openai/validate.js';
import type { PoolConfig } from '../config/schema.js';
import type { PickOptions, PickResult, Ticket } from '../routing/index.js';
import { errors, errorBody, errorEvent, statusLine, type ApiError } from '../openai/errors.js';
import type { GatewayContext } from './context.js';

/** Request headers never forwarded upstream: hop-by-hop ones, those we set ourselves, and the client's credentials. */
const DROP_REQUEST_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'content-length', 'authorization', 'expect', 'x-request-id',
]);
/** Response headers not passed back: hop-by-hop ones and framing, which uWS writes itself. */
const DROP_RESPONSE_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding',
  'upgrade', 'content-length', 'date', 'x-request-id', 'uwebsockets',
]);

/**
 * Non-streamed answers up to this size are gathered and sent with a Content-Length in one write: the client
 * gets the whole JSON or, if the model server dies before its end, a clean 502, never half a body. A larger
 * answer is passed on as it comes once this much has gathered.
 */
const BUFFER_LIMIT = 1 << 20;
const RETRYABLE_STATUS = new Set([502, 503]);
const EMPTY = Buffer.alloc(0);
/** A declared body over this is refused with the connection closed rather than read and dropped. */
const DISCARD_LIMIT = 64 * 1024 * 1024;

type Phase = 'body' | 'upstream' | 'streaming' | 'done';

/** Chunks as one buffer, without a copy when there is only one. */
function joined(chunks: Buffer[]): Buffer {
  return chunks.length === 0 ? EMPTY : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}
/** The picker's options, one object each (none made per request, and one shape for the picker's code). */
const PICK: PickOptions = { explain: false, deferLearn: true };
const PICK_EXPLAIN: PickOptions = { explain: true, deferLearn: true };

export class Exchange {
  private readonly started = performance.now();
  private readonly requestId: string;
  private readonly fwdHeaders: Record<string, string> = {};
  private readonly stickyValue: string | undefined;
  private phase: Phase = 'body';
  private clientGone = false;

  // body
  private readonly declaredLength: number;
  private chunks: Buffer[] = [];
  private received = 0;

  // routing
  private modelLabel = '';
  private pool = '';
  private forwardModel = '';
  private upstreamBody: Buffer = EMPTY;
  private promptText = '';
  private promptTokens = 0;
  /** the client asked for `"stream": true` */
  private streamRequested = false;
  /** endpoints that failed this request (made on the first failure) */
  private failed: Set<string> | undefined;
  private attempts = 0;
  private ticket: Ticket | undefined;
  private endpoint = '';
  /** What to answer if no retry is left: the last upstream failure, as the client should see it. */
  private lastError: ApiError | undefined;
  private poolCfg: PoolConfig | undefined;

  // response
  private controller: Dispatcher.DispatchController | undefined;
  private attemptId = 0;
  private status = 0;
  private resHeaders: Array<[string, string]> = [];
  private headersSent = false;
  private sse = false;
  private buffered: Buffer[] | null = null;
  private bufferedBytes = 0;
  /** streamed chunks of this event-loop turn, written together by flushPending */
  private pending: Buffer[] = [];
  private flushScheduled = false;
  /** made on the first streamed chunk (a buffered answer never needs it) */
  private flushFn: (() => void) | undefined;
  private firstByteAt = 0;
  private series: ReturnType<GatewayContext['metrics']['streamSeries']> | undefined;
  private lastChunkAt = 0;
  private paused = false;
  private writableHooked = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly res: HttpResponse,
    req: HttpRequest,
    private readonly kind: ApiKind,
  ) {
    const stickyHeaders = ctx.stickyHeaders;
    let requestId = '';
    let stickyValue: string | undefined;
    let headerBytes = req.getMethod().length + req.getUrl().length + (req.getQuery() ?? '').length + 12;
    let connection = '';
    let encoding = '';
    req.forEach((key, value) => {
      headerBytes += key.length + value.length + 4;
      if (key === 'connection') connection = value;
      if (key === 'x-request-id') requestId = value;
      if (key === 'content-encoding') encoding = value;
      if (stickyHeaders.has(key)) stickyValue = value;
      if (!DROP_REQUEST_HEADERS.has(key)) {
        // a repeated header is one list (RFC 9110 §5.3; cookies join with "; ")
        const fwd = this.fwdHeaders;
        fwd[key] = Object.hasOwn(fwd, key) ? fwd[key] + (key === 'cookie' ? '; ' : ', ') + value : value;
      }
    });
    // Headers the client named in Connection are hop-by-hop too (RFC 9110 §7.6.1).
    if (connection) for (const name of connection.split(',')) delete this.fwdHeaders[name.trim().toLowerCase()];
    this.requestId = requestId && requestId.length <= 200 ? requestId : randomUUID();
    this.stickyValue = stickyValue;
    this.fwdHeaders['x-request-id'] = this.requestId;
    const cl = req.getHeader('content-length');
    this.declaredLength = cl === '' ? -1 : Number(cl);

    res.onAborted(() => this.onClientAbort());
    ctx.inFlight++;

    if (ctx.draining) {
      this.reject(errors.shuttingDown());
      return;
    }
    // uWS bounds headers only when they span several reads; a whole header block in one read is not
    // limited, so the limit is enforced here too.
    if (headerBytes > ctx.config.limits.max_header_bytes) {
      this.reject(errors.headersTooLarge(ctx.config.limits.max_header_bytes));
      return;
    }
    if (this.declaredLength > ctx.config.limits.max_body_bytes) {
      // A body a little over the limit is read and dropped by uWS after the answer (closing on unread
      // data would reset the connection and could lose the 413); an absurd one is refused and cut.
      this.reject(errors.bodyTooLarge(ctx.config.limits.max_body_bytes), this.declaredLength > DISCARD_LIMIT);
      return;
    }
    if (encoding !== '' && encoding.toLowerCase() !== 'identity') {
      // A compressed body would only fail as "not JSON", with its bytes quoted back.
      this.reject(errors.unsupportedEncoding(encoding), this.declaredLength > DISCARD_LIMIT);
      return;
    }
    if (Number.isNaN(this.declaredLength)) {
      this.reject(errors.invalidField('content-length', 'The Content-Length header is not a number.'), true);
      return;
    }
    res.onData((ab, isLast) => this.onBodyChunk(ab, isLast));
  }

  // ---------------------------------------------------------------- request body

  private onBodyChunk(ab: ArrayBuffer, isLast: boolean): void {
    if (this.phase !== 'body') return;
    const limit = this.ctx.config.limits.max_body_bytes;
    this.received += ab.byteLength;
    if (this.received > limit) {
      // Answer now; what still arrives is dropped by uWS as it comes, never kept.
      this.chunks = [];
      this.reject(errors.bodyTooLarge(limit));
      return;
    }
    // copy now (uWS reuses the memory after this callback); a small body lands in Node's buffer pool rather
    // than a fresh zero-filled ArrayBuffer
    if (ab.byteLength > 0) this.chunks.push(Buffer.from(new Uint8Array(ab)));
    if (!isLast) return;
    const body = joined(this.chunks);
    this.chunks = [];
    this.route(body);
  }

  // ---------------------------------------------------------------- parse and route

  private route(body: Buffer): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch (err) {
      this.reject(errors.invalidJson(body.length === 0 ? 'the body is empty' : (err as Error).message));
      return;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      this.reject(errors.notAnObject());
      return;
    }
    const obj = parsed as Record<string, unknown>;
    const model = obj.model;
    if (typeof model !== 'string' || model.length === 0) {
      this.reject(errors.missingModel());
      return;
    }
    const invalid = this.validate(obj);
    if (invalid) {
      this.reject(invalid);
      return;
    }
    const resolved = this.ctx.router.resolveModel(model, this.stickyValue);
    if (!resolved) {
      this.reject(errors.modelNotFound(model));
      return;
    }
    this.modelLabel = model;
    this.pool = resolved.pool;
    this.poolCfg = this.ctx.config.pools[resolved.pool];
    this.forwardModel = resolved.model;
    if (resolved.model !== model) {
      obj.model = resolved.model;
      this.upstreamBody = Buffer.from(JSON.stringify(obj));
    } else {
      this.upstreamBody = body;
    }
    this.streamRequested = obj.stream === true;
    this.promptText = renderPrompt(obj);
    this.promptTokens = estimateTokens(this.promptText);
    if (!('content-type' in this.fwdHeaders)) this.fwdHeaders['content-type'] = 'application/json';
    if (this.poolCfg.api_key) this.fwdHeaders.authorization = `Bearer ${this.poolCfg.api_key}`;
    this.timer = setTimeout(() => this.onRequestTimeout(), this.ctx.config.limits.request_timeout);
    this.phase = 'upstream';
    this.tryNext();
  }

  /** The OpenAI fields whose shape we rely on, or that any server would refuse, checked before a pod is used. */
  private validate(obj: Record<string, unknown>): ApiError | undefined {
    const p = bodyProblem(this.kind, obj);
    return p ? errors.invalidField(p.param, problemMessage(p)) : undefined;
  }

  // ---------------------------------------------------------------- upstream

  /** First try, or a retry after a failure before the first byte: pick (excluding failed endpoints) and send. */
  private tryNext(): void {
    const pick = this.choose();
    if (pick.kind === 'saturated') this.reject(errors.saturated(this.pool, pick.retryAfterS));
    else if (pick.kind === 'unavailable') this.fail(this.attempts === 0 ? errors.noEndpoint() : this.lastError ?? errors.upstreamUnavailable());
    else this.send(pick);
  }

  /** One decision of the picker, timed, logged at debug level, and shadowed on the first try. */
  private choose(): PickResult {
    const poolCfg = this.poolCfg!;
    const t0 = performance.now();
    const pick: PickResult = this.ctx.router.pick(
      this.pool,
      { model: this.forwardModel, promptText: this.promptText, promptTokens: this.promptTokens, exclude: this.failed },
      Date.now(),
      this.ctx.logger.isLevelEnabled('debug') ? PICK_EXPLAIN : PICK,
    );
    this.ctx.metrics.pickObserved(this.pool, poolCfg.policy, (performance.now() - t0) / 1000);
    if (pick.kind !== 'unavailable' && pick.explain) {
      const decision = pick.kind === 'ok' ? { endpoint: pick.endpoint } : { decision: 'saturated' };
      this.ctx.logger.debug({ req_id: this.requestId, pool: this.pool, ...decision, explain: pick.explain }, 'pick');
    }
    const shadow = poolCfg.shadow_policy;
    if (shadow && pick.kind === 'ok' && this.attempts === 0) {
      // Decide with the shadow policy too, without dispatching or learning, and count agreement.
      const alt = this.ctx.router.pick(this.pool, { model: this.forwardModel, promptText: this.promptText, promptTokens: this.promptTokens }, Date.now(), { policy: shadow, dryRun: true });
      this.ctx.metrics.shadowPick(this.pool, shadow, alt.kind === 'ok' ? (alt.endpoint === pick.endpoint ? 'same' : 'different') : alt.kind);
    }
    return pick;
  }

  private send(pick: Extract<PickResult, { kind: 'ok' }>): void {
    this.ticket = pick.ticket;
    this.endpoint = pick.endpoint;
    this.attempts++;
    if (this.attempts > 1) this.ctx.metrics.retries.inc({ pool: this.pool });
    this.dispatch(pick.endpoint);
  }

  private readonly learnPick = (): void => {
    if (this.ticket) this.ctx.router.learn(this.ticket);
  };

  private get canRetry(): boolean {
    return this.attempts <= this.ctx.config.limits.retries;
  }

  private dispatch(endpoint: string): void {
    const attempt = ++this.attemptId;
    const upstream = this.ctx.upstreams.get(endpoint);
    // (no `origin`: a Pool sends to its own)
    upstream.dispatch(
      { path: this.kind === 'chat' ? '/v1/chat/completions' : '/v1/completions', method: 'POST', headers: this.fwdHeaders, body: this.upstreamBody },
      new Attempt(this, attempt),
    );
  }

  /** Whether undici's callbacks for try `attempt` still matter (not superseded by a retry, exchange not over). */
  isCurrent(attempt: number): boolean {
    return attempt === this.attemptId && this.phase !== 'done' && !this.clientGone;
  }

  /** Attempt's onRequestStart for the current try: undici is about to write the request. */
  upstreamStarted(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // undici calls this just before it writes the request (which may be an event-loop turn or two after
    // dispatch); the pick's deferred learning into the prefix index runs once that write is done. A pick
    // made in between learns it first, so the order of learning never changes.
    queueMicrotask(this.learnPick);
  }

  onUpstreamResponse(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (RETRYABLE_STATUS.has(statusCode)) {
      this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: 'status' });
      if (this.canRetry) {
        // Another endpoint, if there is one: otherwise this answer is passed on as it is.
        (this.failed ??= new Set()).add(this.endpoint);
        const next = this.choose();
        if (next.kind === 'ok') {
          this.endAttempt('error');
          this.attemptId++; // everything the abandoned attempt still reports is ignored
          controller.abort(new Error('retrying on another endpoint'));
          this.send(next);
          return;
        }
      }
    }
    this.status = statusCode;
    this.phase = 'streaming';
    const list: Array<[string, string]> = [];
    let contentType = '';
    let contentLength = -1;
    for (const key in headers) {
      const v = headers[key];
      if (v === undefined) continue;
      if (key === 'content-type') contentType = String(v);
      if (key === 'content-length') contentLength = Number(v);
      if (DROP_RESPONSE_HEADERS.has(key)) continue;
      if (Array.isArray(v)) for (const one of v) list.push([key, one]);
      else list.push([key, v]);
    }
    this.resHeaders = list;
    this.sse = contentType.startsWith('text/event-stream');
    // Gather a non-SSE answer that fits (a declared length within the limit, or no length for a request
    // that did not ask to stream: its JSON is of no use to the client before its end anyway).
    this.buffered = !this.sse && (contentLength >= 0 ? contentLength <= BUFFER_LIMIT : !this.streamRequested) ? [] : null;
    this.bufferedBytes = 0;
  }

  onUpstreamData(chunk: Buffer): void {
    if (this.firstByteAt === 0) {
      const now = performance.now();
      this.firstByteAt = now;
      if (this.ticket) this.ctx.router.onFirstByte(this.ticket, Date.now());
      this.series = this.ctx.metrics.streamSeries(this.modelLabel, this.pool);
      this.series.ttft.observe((now - this.started) / 1000);
    }
    if (this.buffered) {
      this.buffered.push(chunk);
      this.bufferedBytes += chunk.length;
      if (this.bufferedBytes <= BUFFER_LIMIT) return;
      // Longer than announced, or than the limit: what has gathered goes now, the rest as it comes.
      this.pending = this.buffered;
      this.buffered = null;
    } else {
      // One upstream read often holds several HTTP chunks (several SSE events): gather what arrives in
      // this turn of the event loop and send it in one write, one syscall instead of one per event.
      this.pending.push(chunk);
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask((this.flushFn ??= () => this.flushPending()));
    }
  }

  private flushPending(): void {
    this.flushScheduled = false;
    if (this.phase !== 'streaming' || this.clientGone || this.pending.length === 0) return;
    const data = this.takePending();
    let ok = true;
    this.res.cork(() => {
      if (!this.headersSent) this.writeHead(this.status, this.resHeaders);
      ok = this.res.write(data);
    });
    if (!ok) {
      // The client is slower than the model server: stop reading upstream until uWS has drained.
      this.paused = true;
      this.controller?.pause();
      if (!this.writableHooked) {
        this.writableHooked = true;
        this.res.onWritable(() => {
          if (this.paused && !this.clientGone && this.phase !== 'done') {
            this.paused = false;
            this.controller?.resume();
          }
          return true;
        });
      }
    }
  }

  /** The gathered chunks as one buffer (empty when none), with the gap since the last write as ITL. */
  private takePending(): Buffer {
    const n = this.pending.length;
    if (n === 0) return EMPTY;
    const now = performance.now();
    if (this.sse && this.lastChunkAt !== 0) this.series?.itl.observe((now - this.lastChunkAt) / 1000);
    this.lastChunkAt = now;
    const data = joined(this.pending);
    this.pending = [];
    return data;
  }

  onUpstreamEnd(): void {
    const body = this.buffered ? joined(this.buffered) : this.takePending();
    this.res.cork(() => {
      if (!this.headersSent) {
        this.writeHead(this.status, this.resHeaders);
        // While draining for shutdown, a whole answer closes its connection (`Connection: close`), so the
        // client's next request goes elsewhere. Not after a streamed body: uWS 20.30 would write that
        // header into the chunked body.
        if (this.ctx.draining) {
          this.res.end(body, true);
          return;
        }
      }
      if (body.length > 0) this.res.end(body);
      else this.res.end();
    });
    this.finish(this.status, this.status < 500 ? 'ok' : 'error');
  }

  onUpstreamError(err: Error): void {
    const code = (err as { code?: string }).code ?? '';
    const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: timeout ? 'timeout' : this.phase === 'streaming' ? 'stream' : 'connect' });
    if (this.phase === 'upstream') {
      // Nothing reached the client yet: try another endpoint while retries last.
      this.lastError = timeout ? errors.upstreamTimeout() : errors.upstreamUnavailable();
      (this.failed ??= new Set()).add(this.endpoint);
      this.endAttempt('error');
      if (this.canRetry) {
        this.tryNext();
      } else {
        this.fail(this.lastError);
      }
      return;
    }
    this.ctx.logger.warn({ req_id: this.requestId, pool: this.pool, endpoint: this.endpoint, err: code || err.message }, 'upstream failed mid-answer');
    this.breakStream(timeout ? errors.upstreamTimeout() : errors.upstreamStreamBroken());
  }

  /** After the first response byte: end an SSE stream with an error event; cut anything else. */
  private breakStream(e: ApiError): void {
    if (!this.headersSent) {
      this.fail(e);
      return;
    }
    if (this.sse) {
      const data = this.takePending();
      this.res.cork(() => {
        if (data.length > 0) this.res.write(data);
        this.res.write(errorEvent(e));
        this.res.end();
      });
      this.finish(e.status, 'error');
    } else {
      this.finish(e.status, 'error');
      this.res.close(); // a truncated JSON body must not look complete
    }
  }

  private onRequestTimeout(): void {
    if (this.phase === 'done' || this.clientGone) return;
    this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: 'timeout' });
    this.attemptId++;
    this.controller?.abort(new Error('request timeout'));
    this.breakStream(errors.upstreamTimeout());
  }

  // ---------------------------------------------------------------- client side

  private onClientAbort(): void {
    this.clientGone = true;
    if (this.phase === 'done') return;
    // Cancel the upstream request at once, so the model server stops generating.
    this.controller?.abort(new Error('client closed the connection'));
    this.finish(499, 'aborted');
  }

  private writeHead(status: number, headers: Array<[string, string]>): void {
    this.headersSent = true;
    this.res.writeStatus(statusLine(status));
    for (const [k, v] of headers) this.res.writeHeader(k, v);
    this.res.writeHeader('x-request-id', this.requestId);
    if (this.ctx.config.debug_headers && this.endpoint) this.res.writeHeader('x-infergate-endpoint', this.endpoint);
  }

  /** A refusal by the gateway itself (no upstream work was started or it is abandoned). */
  private reject(e: ApiError, closeConnection = false): void {
    if (e.rejectReason) this.ctx.metrics.rejected.inc({ reason: e.rejectReason, pool: this.pool });
    this.respondError(e, closeConnection);
  }

  private fail(e: ApiError): void {
    this.respondError(e, false);
  }

  private respondError(e: ApiError, closeConnection: boolean): void {
    if (this.clientGone || this.phase === 'done') return;
    const body = errorBody(e);
    const endpoint = this.endpoint;
    this.res.cork(() => {
      this.headersSent = true;
      this.res.writeStatus(e.statusText);
      this.res.writeHeader('content-type', 'application/json');
      this.res.writeHeader('x-request-id', this.requestId);
      if (e.retryAfterS !== undefined) this.res.writeHeader('retry-after', String(e.retryAfterS));
      if (this.ctx.config.debug_headers && endpoint && e.status >= 500) this.res.writeHeader('x-infergate-endpoint', endpoint);
      this.res.end(body, closeConnection || this.ctx.draining); // nothing was written before: see onUpstreamEnd
    });
    this.finish(e.status, e.status >= 500 ? 'error' : 'ok');
  }

  private endAttempt(outcome: 'ok' | 'error' | 'aborted'): void {
    if (this.ticket) {
      this.ctx.router.onEnd(this.ticket, Date.now(), outcome);
      this.ticket = undefined;
    }
  }

  private finish(code: number, outcome: 'ok' | 'error' | 'aborted'): void {
    if (this.phase === 'done') return;
    this.phase = 'done';
    if (this.timer) clearTimeout(this.timer);
    this.endAttempt(outcome);
    this.ctx.inFlight--;
    const seconds = (performance.now() - this.started) / 1000;
    this.ctx.metrics.requestDone(this.pool ? this.modelLabel : '', this.pool, code, seconds);
    if (this.ctx.config.logging.access_log && this.ctx.logger.isLevelEnabled('info')) {
      this.ctx.logger.info(
        {
          req_id: this.requestId, model: this.modelLabel || undefined, pool: this.pool || undefined,
          endpoint: this.endpoint || undefined, status: code, attempts: this.attempts,
          prompt_tokens_est: this.promptTokens || undefined,
          ttft_ms: this.firstByteAt ? Math.round((this.firstByteAt - this.started) * 10) / 10 : undefined,
          duration_ms: Math.round(seconds * 10000) / 10,
        },
        'request',
      );
    }
    this.ctx.onExchangeDone();
  }
}

/**
 * undici's callbacks for one try of an exchange (one object per try, rather than a closure per callback):
 * a try superseded by a retry, or outliving its exchange, is ignored (and aborted if it has not started).
 */
class Attempt implements Dispatcher.DispatchHandler {
  constructor(
    private readonly ex: Exchange,
    private readonly id: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.ex.isCurrent(this.id)) this.ex.upstreamStarted(controller);
    else controller.abort(new Error('superseded'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamResponse(controller, statusCode, headers);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamData(chunk);
  }

  onResponseEnd(): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamEnd();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamError(err);
  }
}
