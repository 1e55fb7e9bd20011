/**
 * One client request through the gateway, as its coordinator: the head checked, the token verified while
 * the body arrives (admission.ts), the body checked once, model → pool, the token's models and the other
 * admission checks, a pick per try, the undici dispatch (upstream.ts), retries on another endpoint while
 * nothing has reached the client, the answer relayed (relay.ts), timeouts, client aborts, and the
 * metrics and access-log line at the end (record.ts).
 *
 * It talks to the client only through ClientSide (client.ts); the front adapter (uws-front.ts) keeps
 * the server's rules about requests. The ones left here: every write from an undici callback or a timer
 * is corked; nothing is written once the exchange is done or the client gone (`phase`, `clientGone`);
 * `end(…, true)` only in an answer that had no write before it.
 */
import { randomUUID } from 'node:crypto';
import type { Dispatcher, FormData } from 'undici';
import { MEDIA_PART_TOKENS, pairExtraChars, promptBodyOf, renderPromptHead } from '../openai/prompt.js';
import { tokensOfChars } from '../openai/tokens.js';
import { isAudioKind, type ApiKind } from '../openai/validate.js';
import { errors, errorBody, type ApiError } from '../openai/errors.js';
import { AnswerUsage, withIncludeUsage, type Usage, type UsageMode } from '../openai/usage.js';
import { NO_LEASE, quotaError, rateLimitHeaders, type QuotaDecision, type QuotaLease } from '../quota/index.js';
import type { PoolConfig } from '../config/schema.js';
import type { PickExplain, PickResult, PriorityClass, Ticket } from '../routing/index.js';
import { formatTraceparent, parseTraceparent } from '../observability/trace.js';
import type { RequestSpan } from '../observability/tracing.js';
import { EMPTY } from './buffers.js';
import { UPLOAD_MARK_BYTES, UPLOAD_WINDOW_MS, type ClientHandler, type ClientRequest, type ClientSide } from './client.js';
import type { GatewayContext } from './context.js';
import { choose, type PickTarget } from './pick.js';
import { recordExchange, type ExchangeRecord } from './record.js';
import { Relay, type RelayOwner } from './relay.js';
import { addForwardedFor, addUpstreamHeaders, checkBody, formHeadRefusal, headRefusal, maxBodyOf, readRequest, withModel } from './request-checks.js';
import { formForServer, readAudioForm, type AudioForm } from './audio-form.js';
import { isApiError, type AuthResult } from '../auth/authenticator.js';
import type { Identity } from '../auth/claims.js';
import type { Verdict } from './admission.js';
import { Deadlines, type Deadline, type DeadlineOwner } from './deadlines.js';
import { dispatchTry, isTimeout, isTlsFailure, type UpstreamListener } from './upstream.js';
import { priorityOf, trustedPriorityHeader, type QueueMember } from './flow.js';
import { retryableStatus, retryReasonOf, type RetryBudget, type RetryReason } from './retry.js';
import { previousResponseId, ResponseIdWatch, storedQueryProblem, storedResponseId, wantsStream, type StoredOp } from './response-affinity.js';

/**
 * The APIs whose requests are never edited to ask for a usage chunk (stream_options is a completions
 * field): a whole JSON answer's usage is still read.
 */
const USAGE_FROM_JSON_ONLY: ReadonlySet<ApiKind> = new Set(['embeddings', 'responses', 'tokenize', 'detokenize', 'rerank', 'score', 'classify', 'pooling', 'transcriptions', 'translations']);

/** APIs of pooling models (besides embeddings), placed on load alone: vLLM keeps no prefix cache for them by default. */
const LOAD_ONLY: ReadonlySet<ApiKind> = new Set(['rerank', 'score', 'classify', 'pooling']);

/**
 * body: reading it; admission: body checked, waiting for the token's verification or a check; queued: in
 * its pool's flow-control queue (flow.ts), nothing sent yet
 */
type Phase = 'body' | 'admission' | 'queued' | 'upstream' | 'streaming' | 'done';

/**
 * Every exchange's request and answer deadlines (deadlines.ts: one Node timer per limit's length, not one
 * per request). Its owners never throw (deadlinePassed guards itself); what would is kept from the process.
 */
const deadlines = new Deadlines(() => {});
/** Deadline tags: the whole request's (limits.request_timeout), and a try's whole answer (response_timeout) */
const REQUEST_DEADLINE = -1;

/**
 * Exchanges whose picks are learned into the prefix index once undici has written their requests, in the
 * order they were written: one microtask for all of a turn's, not one closure and microtask per request.
 */
let toLearn: Exchange[] = [];
function learnQueued(): void {
  const list = toLearn;
  toLearn = [];
  for (const ex of list) ex.learnPick();
}

export class Exchange implements ClientHandler, UpstreamListener, RelayOwner, PickTarget, ExchangeRecord, QueueMember, DeadlineOwner {
  readonly started = performance.now();
  readonly requestId: string;
  readonly method: string;
  readonly path: string;
  readonly peer: string;
  /** the client's X-Forwarded-For, as a trusted proxy sent it (undefined from anyone else) */
  readonly forwardedFor: string | undefined;
  /** this request's span: its trace continues the client's traceparent or starts one */
  readonly span: RequestSpan;
  private readonly fwdHeaders: Record<string, string>;
  private readonly stickyValue: string | undefined;
  /** the client's Authorization header (forwarded only to a pool with forward_client_auth) */
  private readonly clientAuthorization: string | undefined;
  /** who sent the request, once the token is verified (ANONYMOUS with auth off) */
  identity: Identity | undefined;

  get tenant(): string {
    return this.identity?.tenant ?? '';
  }

  /** the pool's policy, once the pool is known */
  get policy(): string {
    return this.pool ? this.poolCfg.policy : '';
  }
  private phase: Phase = 'body';
  private clientGone = false;
  /** the request's class for flow control (flow.ts: priorityOf), set at admission */
  priority: PriorityClass = 'standard';
  /** whether `priority` was decided (at admission); before, refusals carry no class */
  private classified = false;
  /** the class once decided, for the access log */
  get priorityClass(): PriorityClass | undefined {
    return this.classified ? this.priority : undefined;
  }
  /** the priority header's value when its sender is trusted with it (auth.priority_header) */
  private headerPriority: string | undefined;
  /** performance.now() when it entered its pool's queue (0: never), and how long it stayed */
  private queuedAt = 0;
  queuedMs = 0;

  // routing (what a pick and the access log need)
  modelLabel = '';
  pool = '';
  poolCfg!: PoolConfig;
  forwardModel = '';
  /** the rendered prompt's first max_blocks × block_chars characters: all the prefix index reads */
  promptText = '';
  /** the whole rendered prompt's length, and its token estimate */
  promptChars = 0;
  promptTokens = 0;
  private upstreamBody: Buffer = EMPTY;
  /** an audio API's form, sent in place of upstreamBody (undici encodes it as it sends it: audio-form.ts) */
  private upstreamForm: FormData | undefined;
  /** a Responses API request's previous_response_id, and the endpoint that served that answer if known */
  private previousId: string | undefined;
  preferEndpoint: string | undefined;
  /** a retrieve or cancel is pinned by the response id in its path */
  get pinnedBy(): 'response_id' | undefined {
    return this.stored === undefined ? undefined : 'response_id';
  }
  /** reads the id of a Responses API answer as it passes, to remember its endpoint (response-affinity.ts) */
  private responseIds: ResponseIdWatch | undefined;
  /** a retrieve or cancel of a stored answer: its id (from the path) and the query string passed on */
  private storedId = '';
  private readonly query: string;
  private learnsResponseId = false;
  /** the current try went to the endpoint previous_response_id pinned (no retry elsewhere) */
  private pinnedTry = false;
  /** the client asked for `"stream": true` */
  private streamRequested = false;
  /** the CORS headers its answer carries (cors.ts; none without a `cors` section) */
  private readonly corsHeaders: ReadonlyArray<readonly [string, string]>;

  // tries
  attempts = 0;
  endpoint = '';
  /** the last pick's explanation, when picks are explained (the access line's scores) */
  picked: PickExplain | undefined;
  /** endpoints that failed this request (made on the first failure) */
  private failed: Set<string> | undefined;
  private ticket: Ticket | undefined;
  /** What to answer if no retry is left: the last upstream failure, as the client should see it. */
  private lastError: ApiError | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  private attemptId = 0;
  /** the whole request's deadline (limits.request_timeout), from its body on */
  private timer: Deadline | undefined;
  /** a non-streamed try's whole-answer deadline (limits.response_timeout), tagged with its attempt */
  private answerTimer: Deadline | undefined;
  /** the pool's retry budget, from the first try to the end (this request counts in its `active`) */
  private budget: RetryBudget | undefined;
  /** the current try is a retry, counted in the budget's activeRetries */
  private retrying = false;
  /** why the next try is a retry (for infergate_retries_total) */
  private retryReason: RetryReason = 'connect';

  // tenant quota (src/quota/): the lease this request holds, the x-ratelimit-* headers its answer carries,
  // and how the answer's usage is read (to charge the real token count)
  private lease: QuotaLease = NO_LEASE;
  private quotaHeaders: ReadonlyArray<[string, string]> = [];
  private usageMode: UsageMode = 'none';
  private answerUsage: AnswerUsage | undefined;
  /** the answer's usage, once it has ended (the token metrics and the access line) */
  usage: Usage | null = null;
  /** the parsed body, kept from onBody until admission is done (the usage request may edit the bytes) */
  private parsedBody: Record<string, unknown> | undefined;
  /** the body's bytes this exchange holds in ctx.bodies until it ends */
  private heldBodyBytes = 0;

  // answer
  firstByteAt = 0;
  /** who ended the exchange early, for the access log: the client leaving, or the gateway (a slow client) */
  closedBy: 'client' | 'gateway' | undefined;
  /** the error answered (its code), and why the gateway refused the request, for the access log */
  errorCode: string | undefined;
  rejectReason: string | undefined;
  /** why the last failed try to a model server failed (undici's error code, else its message), for the access log */
  upstreamError: string | undefined;
  /** made once the model server's answer is accepted (no retry) */
  private relay: Relay | undefined;

  constructor(
    private readonly ctx: GatewayContext,
    readonly client: ClientSide,
    req: ClientRequest,
    private readonly kind: ApiKind,
    /** a call on a stored Responses API answer (`kind` is then 'responses'): no body is read */
    private readonly stored?: StoredOp,
  ) {
    const facts = readRequest(req, ctx.stickyHeaders, randomUUID);
    this.requestId = facts.requestId;
    this.stickyValue = facts.stickyValue;
    this.fwdHeaders = facts.forwarded;
    this.clientAuthorization = facts.authorization;
    this.corsHeaders = ctx.cors?.actual(facts.origin) ?? [];
    this.method = req.method.toUpperCase();
    this.path = req.url;
    this.query = req.query;
    this.peer = req.peer;
    const trusted = ctx.isTrustedProxy(req.peer);
    this.forwardedFor = trusted ? facts.forwarded['x-forwarded-for'] : undefined;
    // W3C trace context: the model server gets this trace with the gateway's span as its parent; a
    // malformed traceparent starts a new trace and its tracestate goes with it
    const parent = parseTraceparent(this.fwdHeaders.traceparent);
    this.span = ctx.tracing.start(parent);
    this.fwdHeaders.traceparent = formatTraceparent(this.span.traceId, this.span.spanId, this.span.sampled);
    if (parent === null) delete this.fwdHeaders.tracestate;
    ctx.inFlight++;
    const refusal =
      headRefusal(facts, ctx.config.limits, ctx.draining, maxBodyOf(ctx.config.limits, kind)) ??
      (isAudioKind(kind) ? formHeadRefusal(this.path, this.fwdHeaders['content-type'], facts.declaredLength) : undefined);
    if (refusal?.cut) this.cut(refusal.error);
    else if (refusal) this.reject(refusal.error, refusal.closeConnection);
    else {
      addForwardedFor(this.fwdHeaders, req.peer, trusted, ctx.scheme);
      this.headerPriority = trustedPriorityHeader(ctx.config.auth.priority_header, this.fwdHeaders, () => trusted);
      // verification starts now, while the body arrives; nothing is forwarded before it is done
      const auth = ctx.admission.authenticate(facts.authorization);
      if (auth instanceof Promise) auth.then((r) => this.onAuthenticated(r), (err: unknown) => this.onInternalError(err));
      else this.authenticated(auth);
    }
  }

  // ---------------------------------------------------------------- admission (admission.ts)

  private onAuthenticated(result: AuthResult): void {
    try {
      this.authenticated(result);
    } catch (err) {
      this.onInternalError(err);
    }
  }

  private authenticated(result: AuthResult): void {
    if (this.phase === 'done' || this.clientGone) return; // the client left meanwhile: nothing to undo
    if (isApiError(result)) {
      this.reject(result); // a 401 before the body is read (or while it arrives): it is dropped
      return;
    }
    this.identity = result;
    if (this.phase === 'admission') this.admit();
  }

  /** The body is checked and the token verified: the token's models, then the other checks. */
  private admit(): void {
    if (this.stored !== undefined && !this.resolveStored()) return;
    if (this.previousId !== undefined && !this.pinPrevious()) return;
    this.priority = priorityOf(this.identity, this.ctx.config.tenants, this.headerPriority);
    this.classified = true;
    const verdict = this.ctx.admission.admit({
      identity: this.identity!,
      model: this.modelLabel,
      target: this.forwardModel,
      pool: this.pool,
      promptTokens: this.promptTokens,
    });
    if (verdict instanceof Promise) verdict.then((v) => this.onAdmitted(v), (err: unknown) => this.onInternalError(err));
    else this.admitted(verdict);
  }

  private onAdmitted(verdict: Verdict): void {
    try {
      if (this.phase === 'admission' && !this.clientGone) this.admitted(verdict);
    } catch (err) {
      this.onInternalError(err);
    }
  }

  private admitted(verdict: Verdict): void {
    if (verdict) {
      this.reject(verdict);
      return;
    }
    const forwardAuth = this.poolCfg.forward_client_auth ? this.clientAuthorization : undefined;
    addUpstreamHeaders(this.fwdHeaders, this.ctx.poolKeys.get(this.pool), forwardAuth, this.upstreamForm ? 'form' : 'json');
    if (this.parsedBody) {
      // the answer's usage (token metrics, the access line, the tenant's token quota): a stream is asked
      // for its usage chunk (kept from a client that did not ask for it); a JSON answer carries usage anyway
      if (USAGE_FROM_JSON_ONLY.has(this.kind)) {
        if (!this.streamRequested) this.usageMode = 'client'; // (a Responses stream's usage is not read)
      } else {
        const u = withIncludeUsage(this.upstreamBody, this.parsedBody);
        this.upstreamBody = u.bytes;
        this.usageMode = u.mode === 'none' && !this.streamRequested ? 'client' : u.mode;
      }
      this.parsedBody = undefined;
    }
    const quota = this.ctx.quota;
    if (!quota.enabled) {
      this.startTries();
      return;
    }
    // the tenant's quota, last: a request refused above never takes any of it
    const tenant = this.tenant || 'anonymous';
    quota.admit(tenant, this.promptTokens).then((d) => this.onQuota(d), (err: unknown) => this.onInternalError(err));
  }

  private onQuota(d: QuotaDecision): void {
    try {
      if (this.phase !== 'admission' || this.clientGone) {
        d.lease.release(); // the request ended meanwhile (client gone, timeout): nothing is held for it
        return;
      }
      this.lease = d.lease;
      this.quotaHeaders = rateLimitHeaders(d);
      if (d.allowed) this.startTries();
      else this.reject(quotaError(d)); // 429 + Retry-After, counted as rejected{reason="rate_limited"}
    } catch (err) {
      this.onInternalError(err);
    }
  }

  private startTries(): void {
    this.phase = 'upstream';
    this.budget = this.ctx.retryBudgets.of(this.pool);
    this.budget.active++;
    this.tryNext();
  }

  // ---------------------------------------------------------------- request body (ClientHandler)

  get wantsBody(): boolean {
    return this.phase === 'body';
  }

  onBodyTooLarge(): void {
    if (this.phase === 'body') this.reject(errors.bodyTooLarge(maxBodyOf(this.ctx.config.limits, this.kind)));
  }

  onBodyBudgetExceeded(): void {
    if (this.phase === 'body') this.reject(errors.bodyBufferFull());
  }

  onBodyTooSlow(): void {
    if (this.phase !== 'body') return;
    this.closedBy = 'gateway';
    this.reject(errors.uploadTooSlow(UPLOAD_MARK_BYTES / (UPLOAD_WINDOW_MS / 1000)), true);
  }

  onBody(raw: Buffer): void {
    if (this.phase !== 'body') return;
    // The body stays in memory until the exchange ends (undici holds what it sends until the answer is
    // over; a retry sends it again): it counts in the same budget as the bodies being received, so
    // many slow requests with large bodies are refused 503 before they exhaust the process's memory.
    if (raw.length > 0) {
      if (!this.ctx.bodies.reserve(raw.length)) {
        this.reject(errors.bodyBufferFull());
        return;
      }
      this.heldBodyBytes = raw.length;
    }
    if (this.stored !== undefined) {
      this.storedCall();
      return;
    }
    if (isAudioKind(this.kind)) {
      // a form, read off this call (audio-form.ts); the exchange stays in its body phase meanwhile
      readAudioForm(this.path, raw, this.fwdHeaders['content-type']).then((f) => this.onAudioForm(f), (err: unknown) => this.onInternalError(err));
      return;
    }
    const checked = checkBody(this.kind, raw, this.ctx.config.limits.max_json_depth);
    if ('error' in checked) {
      this.reject(checked.error);
      return;
    }
    const { body, model } = checked;
    if (!this.routeModel(model)) return;
    this.upstreamBody = this.forwardModel === model ? raw : withModel(raw, checked, this.forwardModel);
    this.streamRequested = body.stream === true;
    this.parsedBody = body;
    if (this.kind === 'responses') {
      // a conversation's next turn goes where its last answer is stored (response-affinity.ts)
      const prev = previousResponseId(body);
      if (typeof prev === 'object') {
        this.reject(prev);
        return;
      }
      const affinity = this.ctx.responseAffinity;
      if (affinity.enabled) {
        this.previousId = prev;
        // an answer made with store: false is kept by no server: its id is not worth a place
        this.learnsResponseId = body.store !== false;
      }
    }
    const prefix = this.poolCfg.prefix;
    const kind = this.kind;
    const head = renderPromptHead(promptBodyOf(kind, body), prefix.max_blocks * prefix.block_chars);
    this.promptText = head.text;
    this.promptChars = head.chars + pairExtraChars(kind, body);
    // each image (or other media part) weighs what the pool's model makes of one, not the rendering's share
    this.promptTokens = tokensOfChars(this.promptChars) + head.media * (this.poolCfg.media_tokens - MEDIA_PART_TOKENS);
    // No prefix affinity where no KV cache is reused: tokenizing, the pooling models' APIs (reranking and
    // scoring: a cross-encoder's pass over each pair; classifying, pooling), and embeddings unless the
    // pool asks for it. An empty text matches nothing and teaches the index nothing; their length still
    // weighs the load, while tokenizing runs no model at all: no prefill work, no tokens charged to the
    // tenant.
    if (kind === 'tokenize' || kind === 'detokenize') {
      this.promptText = '';
      this.promptTokens = 0;
    } else if ((kind === 'embeddings' && !prefix.embeddings) || LOAD_ONLY.has(kind)) this.promptText = '';
    this.bodyDone();
  }

  /** The pool and the model sent on for the client's `model`, or false with the request refused (404). */
  private routeModel(model: string): boolean {
    const resolved = this.ctx.router.resolveModel(model, this.stickyValue);
    // a pool that a reload added after this request started is not in its config generation: the model
    // did not exist for it
    if (!resolved || !Object.hasOwn(this.ctx.config.pools, resolved.pool)) {
      this.reject(errors.modelNotFound(model));
      return false;
    }
    this.modelLabel = model;
    this.pool = resolved.pool;
    this.poolCfg = this.ctx.config.pools[resolved.pool];
    this.forwardModel = resolved.model;
    return true;
  }

  /** The body is read and checked: the request's deadline starts, and admission once the token is verified. */
  private bodyDone(): void {
    this.timer = deadlines.add(this.ctx.config.limits.request_timeout, this, REQUEST_DEADLINE);
    this.phase = 'admission';
    if (this.identity) this.admit(); // else the verification, when it ends, admits
  }

  // ---------------------------------------------------------------- an audio API's form

  private onAudioForm(f: AudioForm | { error: ApiError }): void {
    try {
      if (this.phase !== 'body' || this.clientGone) return; // refused (a token) or left meanwhile
      if ('error' in f) {
        this.reject(f.error);
        return;
      }
      if (!this.routeModel(f.model)) return;
      this.streamRequested = f.stream;
      // Placed on load alone, with no prompt estimate: the audio's length is not known without decoding
      // it, and a transcription reuses no cached prefix. Its usage (audio seconds, or tokens when a
      // stream asks for them) is read from the answer.
      this.upstreamForm = formForServer(f.form, this.forwardModel);
      this.bodyDone();
    } catch (err) {
      this.onInternalError(err);
    }
  }

  // ---------------------------------------------------------------- a stored Responses API answer

  /**
   * A retrieve or cancel (its body, if any, is not read): the id in the path and the query string checked
   * (400), then admission once the token is verified. Which pool and endpoint is known only from the
   * remembered answer, looked up after the token (resolveStored), so a client without a valid token learns
   * nothing of which ids exist.
   */
  private storedCall(): void {
    const id = storedResponseId(this.path, this.stored!);
    if (typeof id !== 'string') {
      this.reject(id);
      return;
    }
    const bad = storedQueryProblem(this.query);
    if (bad) {
      this.reject(bad);
      return;
    }
    this.storedId = id;
    this.streamRequested = this.stored === 'retrieve' && wantsStream(this.query);
    this.timer = deadlines.add(this.ctx.config.limits.request_timeout, this, REQUEST_DEADLINE);
    this.phase = 'admission';
    if (this.identity) this.admit();
  }

  /**
   * A follow-up's previous answer, once the token is verified (so its tenant is known): pinned to the
   * endpoint that stored it, or a 404 when this gateway relayed it for another tenant (a server holding it
   * would continue that conversation for whoever names its id); an id it does not know is routed as any.
   */
  private pinPrevious(): boolean {
    const served = this.ctx.responseAffinity.lookup(this.previousId!);
    if (served !== undefined && served.tenant !== this.tenant) {
      this.ctx.metrics.responseAffinity.inc({ pool: this.pool, outcome: 'other_tenant' });
      this.reject(errors.previousResponseNotFound(this.previousId!));
      return false;
    }
    this.preferEndpoint = served !== undefined && served.pool === this.pool ? served.endpoint : undefined;
    return true;
  }

  /**
   * The remembered answer's pool, model and endpoint, or a 404 without asking any server: an id this
   * gateway did not relay, has forgotten, relayed for another tenant, or whose pool a reload removed.
   */
  private resolveStored(): boolean {
    const affinity = this.ctx.responseAffinity;
    const served = affinity.lookup(this.storedId);
    if (served === undefined || served.tenant !== this.tenant || !Object.hasOwn(this.ctx.config.pools, served.pool)) {
      this.ctx.metrics.storedResponseCalls.inc({ pool: '', op: this.stored!, outcome: 'unknown' });
      this.reject(errors.responseNotRelayed(this.storedId, affinity.enabled));
      return false;
    }
    this.modelLabel = served.model;
    this.forwardModel = served.target;
    this.pool = served.pool;
    this.poolCfg = this.ctx.config.pools[served.pool];
    this.preferEndpoint = served.endpoint;
    return true;
  }

  /**
   * A stored answer's only try: its endpoint, picked while it is in the pool and not ejected (no queue, no
   * saturation: only that server holds the answer), else the 502 a pinned try that fails gets.
   */
  private tryStored(): void {
    const pick = choose(this.ctx, this, undefined, false);
    if (pick.kind === 'ok' && pick.pinned) {
      this.ctx.metrics.storedResponseCalls.inc({ pool: this.pool, op: this.stored!, outcome: 'pinned' });
      this.send(pick);
      return;
    }
    if (pick.kind === 'ok') this.ctx.router.onEnd(pick.ticket, Date.now(), 'aborted'); // another server: not sent
    this.ctx.metrics.storedResponseCalls.inc({ pool: this.pool, op: this.stored!, outcome: 'gone' });
    this.fail(errors.upstreamUnavailable());
  }

  // ---------------------------------------------------------------- tries

  /** First try, or a retry after a failure before the first byte: pick (excluding failed endpoints) and send. */
  private tryNext(): void {
    if (this.stored !== undefined) {
      this.tryStored();
      return;
    }
    const first = this.attempts === 0;
    if (first && this.ctx.flow.mustQueue(this)) {
      this.waitInQueue(undefined); // others of its class or higher wait already: never overtake them
      return;
    }
    const pick = choose(this.ctx, this, this.failed, first);
    if (pick.kind === 'saturated') {
      if (first) this.waitInQueue(pick.retryAfterS);
      else this.reject(errors.saturated(this.pool, pick.retryAfterS));
    } else if (pick.kind === 'unavailable') this.fail(this.attempts === 0 ? errors.noEndpoint() : this.lastError ?? errors.upstreamUnavailable());
    else this.send(pick);
  }

  // ---------------------------------------------------------------- flow control (flow.ts: QueueMember)

  /** The pool is saturated for this request: it waits in the pool's queue, or is refused (sheddable, full, off). */
  private waitInQueue(retryAfterS: number | undefined): void {
    this.phase = 'queued';
    this.queuedAt = performance.now();
    const refusal = this.ctx.flow.enqueue(this, retryAfterS);
    if (refusal) this.reject(refusal);
  }

  pickFromQueue(): PickResult {
    return choose(this.ctx, this, undefined, true, true);
  }

  dequeued(pick: Exclude<PickResult, { kind: 'saturated' }>): void {
    if (this.phase !== 'queued') {
      if (pick.kind === 'ok') this.ctx.router.onEnd(pick.ticket, Date.now(), 'aborted'); // nothing to send it for
      return;
    }
    this.queuedMs = performance.now() - this.queuedAt;
    this.phase = 'upstream';
    if (pick.kind === 'ok') this.send(pick);
    else this.fail(errors.noEndpoint());
  }

  refusedFromQueue(e: ApiError): void {
    if (this.phase !== 'queued') return;
    this.queuedMs = performance.now() - this.queuedAt;
    this.reject(e);
  }

  private send(pick: Extract<PickResult, { kind: 'ok' }>): void {
    this.ticket = pick.ticket;
    this.endpoint = pick.endpoint;
    this.picked = pick.explain;
    this.pinnedTry = pick.pinned === true;
    if (this.attempts === 0 && this.previousId !== undefined) {
      const outcome = pick.pinned ? 'pinned' : this.preferEndpoint !== undefined ? 'gone' : 'unknown';
      this.ctx.metrics.responseAffinity.inc({ pool: this.pool, outcome });
    }
    this.attempts++;
    if (this.attempts > 1) this.ctx.metrics.retries.inc({ pool: this.pool, reason: this.retryReason });
    const limits = this.ctx.config.limits;
    // A stream may stay silent first_byte_timeout at most (before its first token or between chunks); a
    // non-streamed answer comes whole when it is all generated, so its deadline is for the whole answer.
    if (!this.streamRequested) {
      this.answerTimer?.cancel();
      this.answerTimer = deadlines.add(limits.response_timeout, this, this.attemptId + 1);
    }
    const target = this.stored === undefined ? undefined : storedTarget(this.stored, this.storedId, this.query);
    dispatchTry(this.ctx.upstreams, pick.endpoint, this.kind, this.fwdHeaders, this.upstreamForm ?? this.upstreamBody, this, ++this.attemptId, this.streamRequested ? limits.first_byte_timeout : 0, target);
  }

  /**
   * Whether a failed try may be sent again (retry.ts says for which failures): retries left for this
   * request, and room in the pool's retry budget (a request already retrying holds its place there).
   */
  private retryAllowed(): boolean {
    // a try pinned by previous_response_id: any other server would only answer not-found, so the pinned
    // server's own failure is the truer answer
    if (!this.canRetry || !this.budget || this.pinnedTry) return false;
    if (this.retrying || this.budget.allows(this.poolCfg.retry_budget)) return true;
    this.ctx.metrics.retryBudgetExhausted.inc({ pool: this.pool });
    return false;
  }

  /** The next try is a retry (after retryAllowed): it holds a place in the pool's budget until the end. */
  private startRetry(reason: RetryReason): void {
    if (!this.retrying) {
      this.retrying = true;
      this.budget!.activeRetries++;
    }
    this.retryReason = reason;
  }

  /** The whole non-streamed answer took longer than limits.response_timeout: cancelled, 504, no retry. */
  /** A deadline of this exchange passed (deadlines.ts): the request's, or a try's answer's. Never throws. */
  deadlinePassed(d: Deadline): void {
    if (d.tag !== REQUEST_DEADLINE) {
      this.onResponseTimeout(d.tag);
      return;
    }
    try {
      this.timer = undefined;
      this.onRequestTimeout();
    } catch (err) {
      this.onInternalError(err);
    }
  }

  private onResponseTimeout(attempt: number): void {
    try {
      this.answerTimer = undefined;
      if (!this.isCurrent(attempt)) return;
      this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: 'timeout' });
      this.attemptId++; // whatever the try still reports is ignored
      this.controller?.abort(new Error('response timeout'));
      this.endAttempt('error');
      this.breakStream(errors.upstreamTimeout());
    } catch (err) {
      this.onInternalError(err);
    }
  }

  /** learns the pick of the try just written (learnQueued); never throws */
  learnPick(): void {
    try {
      if (this.ticket) this.ctx.router.learn(this.ticket);
    } catch (err) {
      this.onInternalError(err);
    }
  }

  private get canRetry(): boolean {
    return this.attempts <= this.ctx.config.limits.retries;
  }

  /** The current endpoint failed this request: no retry goes there. */
  private dropEndpoint(): void {
    (this.failed ??= new Set()).add(this.endpoint);
  }

  // ---------------------------------------------------------------- undici's callbacks (UpstreamListener)

  isCurrent(attempt: number): boolean {
    return attempt === this.attemptId && this.phase !== 'done' && !this.clientGone;
  }

  upstreamStarted(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // undici calls this just before it writes the request (which may be an event-loop turn or two after
    // dispatch); the pick's deferred learning into the prefix index runs once that write is done. A pick
    // made in between learns it first, so the order of learning never changes.
    if (toLearn.push(this) === 1) queueMicrotask(learnQueued);
  }

  onUpstreamResponse(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (retryableStatus(statusCode)) {
      this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: 'status' });
      if (this.retryAllowed()) {
        // Another endpoint, if there is one (and retries and the budget allow): otherwise this answer is
        // passed on as it is.
        this.dropEndpoint();
        const next = choose(this.ctx, this, this.failed, false);
        if (next.kind === 'ok') {
          this.startRetry('status');
          this.endAttempt('error');
          this.attemptId++; // everything the abandoned attempt still reports is ignored
          controller.abort(new Error('retrying on another endpoint'));
          this.send(next);
          return;
        }
      }
    }
    this.phase = 'streaming';
    this.relay = new Relay(this, statusCode, headers, this.streamRequested, this.ctx.config.limits.client_stall_timeout, this.ctx.config.debug_headers);
    // (a stored answer's usage is not charged again: it was when the answer was made)
    if (statusCode < 300 && this.stored === undefined) {
      if (this.learnsResponseId) this.responseIds = new ResponseIdWatch();
      this.answerUsage = new AnswerUsage(this.usageMode, this.relay.sse, this.responseIds);
    }
  }

  onUpstreamData(chunk: Buffer): void {
    const relay = this.relay!;
    if (this.firstByteAt === 0) {
      const now = performance.now();
      this.firstByteAt = now;
      if (this.ticket) this.ctx.router.onFirstByte(this.ticket, Date.now());
      this.ctx.flow.wake(this.pool); // no longer waiting for a first byte: a queued request may fit now
      const series = this.ctx.metrics.streamSeries(this.modelLabel, this.pool);
      series.ttft.observe((now - this.started) / 1000);
      relay.itl = series.itl;
    }
    const out = this.answerUsage ? this.answerUsage.data(chunk) : chunk;
    if (out.length > 0) relay.data(out);
  }

  onUpstreamEnd(): void {
    const relay = this.relay!;
    const usage = this.answerUsage;
    if (usage) {
      const rest = usage.end();
      if (rest.length > 0) relay.data(rest); // taken by end() below, in the same turn
      const u = usage.usage;
      this.usage = u;
      if (u) this.lease.reconcile(u.promptTokens, u.completionTokens);
    }
    const id = this.responseIds?.id;
    if (id !== undefined) {
      this.ctx.responseAffinity.remember(id, { pool: this.pool, endpoint: this.endpoint, model: this.modelLabel, target: this.forwardModel, tenant: this.tenant });
    }
    relay.end();
    this.finish(relay.status, relay.status < 500 ? 'ok' : 'error');
  }

  onUpstreamError(err: Error): void {
    if ((err as { code?: string }).code === 'UND_ERR_INVALID_ARG') {
      // undici refused what we asked it to send: our failure, not the endpoint's (no ejection, no upstream
      // error counted)
      this.endAttempt('aborted');
      this.onInternalError(err);
      return;
    }
    if ((err as { code?: string }).code === 'INFERGATE_SHUTTING_DOWN') {
      // the gateway's own shutdown cut this request (Upstreams.close): not the model server's failure
      this.endAttempt('aborted');
      this.ctx.logger.warn({ req_id: this.requestId, pool: this.pool, endpoint: this.endpoint, code: 'shutting_down' }, 'request cut by shutdown');
      this.breakStream(errors.shuttingDown());
      return;
    }
    const timeout = isTimeout(err);
    this.upstreamError = ((err as { code?: string }).code || err.message || 'unknown').slice(0, 200);
    this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: timeout ? 'timeout' : this.phase === 'streaming' ? 'stream' : 'connect' });
    if (this.phase === 'upstream') {
      // No answer byte yet: another endpoint, if the failure proves this one did not take the request
      // (refused, reset: retry.ts) and retries and the budget last. A timeout is not retried: the try is
      // over (undici closed its connection, so the server stops) and the client gets 504.
      const tls = timeout ? undefined : isTlsFailure(err);
      this.lastError = timeout ? errors.upstreamTimeout() : tls !== undefined ? errors.upstreamTls(this.pool, tls) : errors.upstreamUnavailable();
      this.dropEndpoint();
      this.endAttempt('error');
      const reason = retryReasonOf(err);
      if (reason !== null && this.retryAllowed()) {
        this.startRetry(reason);
        this.tryNext();
      } else {
        this.fail(this.lastError);
      }
      return;
    }
    const code = (err as { code?: string }).code ?? '';
    this.ctx.logger.warn({ req_id: this.requestId, pool: this.pool, endpoint: this.endpoint, err: code || err.message }, 'upstream failed mid-answer');
    this.breakStream(timeout ? errors.upstreamTimeout() : errors.upstreamStreamBroken());
  }

  /** After the first response byte: end an SSE stream with an error event; cut anything else. */
  private breakStream(e: ApiError): void {
    this.errorCode ??= e.code;
    const relay = this.relay;
    if (!relay || !relay.headersSent) {
      this.fail(e);
      return;
    }
    if (relay.sse) {
      relay.endWithErrorEvent(e);
      this.finish(e.status, 'error');
    } else {
      this.finish(e.status, 'error');
      this.client.close(); // a truncated JSON body must not look complete
    }
  }

  private onRequestTimeout(): void {
    if (this.phase === 'done' || this.clientGone) return;
    this.ctx.metrics.upstreamErrors.inc({ pool: this.pool, kind: 'timeout' });
    this.attemptId++;
    this.controller?.abort(new Error('request timeout'));
    // the endpoint's fault only if it never answered; a long answer cut at the request's limit is not
    this.endAttempt(this.phase === 'upstream' ? 'error' : 'aborted');
    this.breakStream(errors.upstreamTimeout());
  }

  // ---------------------------------------------------------------- the relay's view (RelayOwner)

  relaying(): boolean {
    return this.phase === 'streaming' && !this.clientGone;
  }

  writeOwnHeaders(): void {
    this.client.writeHeader('x-request-id', this.requestId);
    for (const [k, v] of this.quotaHeaders) this.client.writeHeader(k, v);
    for (const [k, v] of this.corsHeaders) this.client.writeHeader(k, v);
    if (this.ctx.config.debug_headers && this.endpoint) this.client.writeHeader('x-infergate-endpoint', this.endpoint);
  }

  pauseUpstream(): void {
    this.controller?.pause();
  }

  resumeUpstream(): void {
    this.controller?.resume();
  }

  closesConnection(): boolean {
    return this.ctx.draining;
  }

  /** The client does not take the answer (relay.ts): the gateway ends it, and the log says so. */
  clientStalled(why: string): void {
    if (this.phase === 'done' || this.clientGone) return;
    this.ctx.logger.warn({ req_id: this.requestId, pool: this.pool, why }, 'client stalled: answer ended by the gateway');
    this.attemptId++;
    this.controller?.abort(new Error('client stalled'));
    this.closedBy = 'gateway';
    this.finish(408, 'aborted');
    this.client.close(); // what it has not read cannot be completed
  }

  // ---------------------------------------------------------------- client side

  onClientAbort(): void {
    this.clientGone = true;
    if (this.phase === 'done') return;
    this.closedBy = 'client';
    // Cancel the upstream request at once, so the model server stops generating.
    this.controller?.abort(new Error('client closed the connection'));
    this.finish(499, 'aborted');
  }

  /**
   * A bug while handling this request (an exception from any of its callbacks): logged, the upstream try
   * cancelled, and the client answered 500 — or, once an answer has started, an SSE error event or a cut
   * connection — so that one request's failure never reaches the process or the other requests. Never
   * throws.
   */
  onInternalError(err: unknown): void {
    try {
      this.ctx.logger.error({ err, req_id: this.requestId, pool: this.pool || undefined }, 'request handling failed');
      this.attemptId++; // whatever the current try still reports is ignored
      this.controller?.abort(new Error('internal error'));
      this.endAttempt('aborted'); // our failure, not the endpoint's: it does not count toward its ejection
      if (this.phase === 'done' || this.clientGone) return;
      const e = errors.internal();
      if (this.relay?.headersSent) this.breakStream(e);
      else this.fail(e);
    } catch {
      // answering failed too: at least release this request's accounting
      try {
        this.finish(500, 'error');
      } catch {
        // nothing more can be done for this request
      }
    }
  }

  /** A refusal by cutting the connection, without an answer (see HeadRefusal.cut): counted and logged. */
  private cut(e: ApiError): void {
    if (e.rejectReason) this.ctx.metrics.rejected.inc({ reason: e.rejectReason, pool: this.pool, priority: this.priorityClass ?? '' });
    this.errorCode = e.code;
    this.rejectReason = e.rejectReason;
    this.ctx.logger.warn({ req_id: this.requestId, code: e.code, why: e.message }, 'connection cut');
    this.closedBy = 'gateway';
    this.finish(e.status, 'ok'); // first: closing runs onClientAbort at once, which would log a 499
    this.client.close();
  }

  /** A refusal by the gateway itself (no upstream work was started or it is abandoned). */
  private reject(e: ApiError, closeConnection = false): void {
    if (e.rejectReason) this.ctx.metrics.rejected.inc({ reason: e.rejectReason, pool: this.pool, priority: this.priorityClass ?? '' });
    if (this.phase !== 'done' && !this.clientGone) this.rejectReason = e.rejectReason;
    this.respondError(e, closeConnection);
  }

  private fail(e: ApiError): void {
    this.respondError(e, false);
  }

  private respondError(e: ApiError, closeConnection: boolean): void {
    if (this.clientGone || this.phase === 'done') return;
    this.errorCode = e.code;
    const body = errorBody(e);
    const endpoint = this.endpoint;
    const client = this.client;
    client.cork(() => {
      client.writeStatus(e.statusText);
      client.writeHeader('content-type', 'application/json');
      client.writeHeader('x-request-id', this.requestId);
      if (e.retryAfterS !== undefined) client.writeHeader('retry-after', String(e.retryAfterS));
      for (const [k, v] of this.quotaHeaders) client.writeHeader(k, v);
      for (const [k, v] of this.corsHeaders) client.writeHeader(k, v);
      if (e.wwwAuthenticate !== undefined) client.writeHeader('www-authenticate', e.wwwAuthenticate);
      if (this.ctx.config.debug_headers && endpoint && e.status >= 500) client.writeHeader('x-infergate-endpoint', endpoint);
      client.end(body, closeConnection || this.ctx.draining); // nothing was written before: see Relay.end
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
    if (this.phase === 'queued') {
      // it leaves the queue at once (its client hung up, its request timed out): nothing was sent upstream
      this.queuedMs = performance.now() - this.queuedAt;
      this.ctx.flow.leave(this, this.clientGone ? 'client_gone' : 'error');
    }
    this.phase = 'done';
    this.timer?.cancel();
    this.answerTimer?.cancel();
    if (this.budget) {
      this.budget.active--;
      if (this.retrying) this.budget.activeRetries--;
    }
    this.relay?.dispose();
    this.lease.release(); // once: every end passes here
    this.ctx.bodies.release(this.heldBodyBytes);
    this.heldBodyBytes = 0;
    const held = this.ticket !== undefined;
    this.endAttempt(outcome);
    this.ctx.inFlight--;
    if (held) this.ctx.flow.wake(this.pool); // its endpoint has room again: the pool's queue may move
    recordExchange(this.ctx, this, code);
    this.ctx.onExchangeDone(this);
  }
}

/** The upstream method and path of a call on a stored answer (the id re-encoded; the query as the client sent it). */
function storedTarget(op: StoredOp, id: string, query: string): { method: 'GET' | 'POST'; path: string } {
  const path = `/v1/responses/${encodeURIComponent(id)}${op === 'cancel' ? '/cancel' : ''}`;
  return op === 'cancel' ? { method: 'POST', path } : { method: 'GET', path: query === '' ? path : `${path}?${query}` };
}
