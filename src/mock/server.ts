/**
 * One simulated vLLM server: the uWS app and its routes in front of one `Engine`, and the class that
 * wires the server's parts: admission (admission.ts), the real-time driver of the engine (driver.ts),
 * answer writing (stream.ts), `/metrics` (vllm-metrics.ts) and injected faults (faults.ts). The only
 * file of the mock that uses uWebSockets.js.
 *
 * Latency metrics (TTFT, ITL, e2e, queue) are observed in model time, as a real vLLM would see them.
 */
import type uWS from 'uWebSockets.js';
import { loadUws } from '../common/uws.js';
import { listenExclusive } from '../common/listen.js';
import { Engine, type EngineEvent, type EngineSnapshot } from '../engine/index.js';
import { admit, type ServedModel } from './admission.js';
import { audioAnswer, cancelAnswer, classifyAnswer, detokenizeAnswer, embeddingsAnswer, poolingAnswer, rerankAnswer, responsesAnswer, retrieveAnswer, scoreAnswer, tokenizeAnswer, type ApiAnswer, type AudioRequest } from './apis.js';
import type { AudioKind, FormValue } from '../openai/validate.js';
import { RealTimeDriver } from './driver.js';
import { Faults } from './faults.js';
import { modelsBody } from './models.js';
import { profileFromOptions, type MockOptions } from './options.js';
import { DEFAULT_RESPONSE_STORE_ENTRIES, ResponseStore } from './response-store.js';
import { newReply, ReplyWriter, type Reply } from './stream.js';
import { METRICS_CONTENT_TYPE, VllmMetrics } from './vllm-metrics.js';

/** What GET /mock/requests shows of each inference request (for tests of what a gateway forwards). */
interface SeenRequest {
  path: string;
  x_request_id?: string;
  traceparent?: string;
  tracestate?: string;
}
const SEEN_KEPT = 64;

/** HOST:PORT as an endpoint is written (an IPv6 address in brackets). */
function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

type Res = uWS.HttpResponse;

const textDecoder = new TextDecoder();

/** A multipart form's fields and its `file`'s bytes, or null when the body is not a form. */
async function readForm(raw: Buffer, contentType: string): Promise<AudioRequest | null> {
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw.buffer as ArrayBuffer, raw.byteOffset, raw.byteLength), { headers: { 'content-type': contentType } }).formData();
  } catch {
    return null;
  }
  const fields = new Map<string, FormValue[]>();
  let audio: Uint8Array = new Uint8Array(0);
  for (const [name, value] of form) {
    let v: FormValue;
    if (typeof value === 'string') v = value;
    else {
      v = { filename: value.name, size: value.size };
      if (name === 'file' && !fields.has('file')) audio = new Uint8Array(await value.arrayBuffer());
    }
    const list = fields.get(name);
    if (list === undefined) fields.set(name, [v]);
    else list.push(v);
  }
  return { fields, audio };
}

function errorBody(message: string, type: string, code: number, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

const STATUS: Record<number, string> = {
  200: '200 OK',
  400: '400 Bad Request',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  413: '413 Payload Too Large',
  500: '500 Internal Server Error',
};
const ERROR_TYPE: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  413: 'BadRequestError',
  500: 'InternalServerError',
};

export class MockServer {
  readonly engine: Engine;
  readonly host: string;
  port: number;
  endpoint: string;
  readonly model: string;
  readonly loras: string[];
  readonly faults: Faults;
  private readonly app: uWS.TemplatedApp;
  private listenSocket: uWS.us_listen_socket | null = null;
  private readonly seed: number;
  /** the Responses API answers kept for `previous_response_id` (response-store.ts) */
  private readonly responses: ResponseStore;
  private readonly maxBody: number;
  private readonly driver: RealTimeDriver;
  private readonly replies: ReplyWriter;
  private readonly metrics = new VllmMetrics();
  /** `/metrics` requests held open while the metrics fault is `hang` */
  private readonly hungMetrics = new Set<Res>();
  private nextId = 1;
  /** completion requests received (whatever became of them), and those their client cancelled */
  private completionsSeen = 0;
  private abortedByClient = 0;
  private closed = false;
  private readonly timeScale: number;
  /** background Responses API answers being "generated": each completes when its timer fires */
  private readonly backgroundTimers = new Set<NodeJS.Timeout>();

  constructor(opts: MockOptions, host: string, port: number) {
    if (!opts.model) throw new Error('mock: model is required');
    this.engine = new Engine(profileFromOptions(opts));
    this.model = opts.model;
    this.loras = [...this.engine.profile.loras];
    this.host = host;
    this.port = port;
    this.endpoint = hostPort(host, port);
    this.driver = new RealTimeDriver(
      this.engine,
      opts.timeScale ?? 1,
      (events) => this.onStepEvents(events),
      () => this.replies.flush(),
    );
    this.replies = new ReplyWriter(
      () => this.endpoint,
      (r, abort) => this.drop(r, abort),
    );
    this.seed = opts.seed ?? 0;
    this.timeScale = opts.timeScale ?? 1;
    this.responses = new ResponseStore(opts.responseStore ?? DEFAULT_RESPONSE_STORE_ENTRIES);
    this.maxBody = opts.maxBodyBytes ?? 64 * 1024 * 1024;
    this.faults = new Faults(opts, this.seed, port);
    this.app = opts.tls ? loadUws().SSLApp({ cert_file_name: opts.tls.cert, key_file_name: opts.tls.key }) : loadUws().App();
    this.routes();
  }

  /** SSE data events written (for throughput measurement) */
  get sseEvents(): number {
    return this.replies.sseEvents;
  }

  /** model time now, ms */
  vnow(): number {
    return this.driver.now();
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, this.host, this.port, (tok) => {
        if (!tok) reject(new Error(`cannot listen on ${this.host}:${this.port} (in use or not permitted)`));
        else {
          this.listenSocket = tok;
          if (this.port === 0) {
            this.port = loadUws().us_socket_local_port(tok as unknown as uWS.us_socket);
            this.endpoint = hostPort(this.host, this.port);
          }
          resolve();
        }
      });
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.driver.stop();
    this.faults.stop();
    for (const timer of this.backgroundTimers) clearTimeout(timer);
    this.backgroundTimers.clear();
    if (this.listenSocket) loadUws().us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    this.replies.closeAll();
    for (const r of [...this.hungMetrics]) r.close();
    this.hungMetrics.clear();
    // close idle keep-alive connections too (present at run time in this uWS build, untyped)
    const app = this.app as unknown as { close?: () => void };
    if (typeof app.close === 'function') app.close();
  }

  snapshot(): EngineSnapshot {
    return this.engine.snapshot();
  }

  metricsText(): string {
    return this.metrics.text(this.engine.snapshot(), this.model, Date.now() / 1000);
  }

  // ---------------------------------------------------------------- routes

  /** `head`: the same status and headers without the body (uWS would send one; see src/gateway/README.md). */
  private send(res: Res, status: number, body: string, contentType = 'application/json', head = false): void {
    res.cork(() => {
      res
        .writeStatus(STATUS[status] ?? `${status} Error`)
        .writeHeader('content-type', contentType)
        .writeHeader('x-mock-endpoint', this.endpoint);
      if (head) res.endWithoutBody();
      else res.end(body);
    });
  }

  private sendError(res: Res, status: number, message: string, param: string | null = null, type?: string): void {
    this.send(res, status, errorBody(message, type ?? ERROR_TYPE[status] ?? 'Error', status, param));
  }

  private routes(): void {
    const app = this.app;
    app.post('/v1/chat/completions', (res, req) => {
      this.noteRequest(req, '/v1/chat/completions');
      this.completion(res, true);
    });
    app.post('/v1/completions', (res, req) => {
      this.noteRequest(req, '/v1/completions');
      this.completion(res, false);
    });
    app.post('/v1/embeddings', (res, req) => {
      this.noteRequest(req, '/v1/embeddings');
      this.answerWhole(res, (text) => embeddingsAnswer(text, this.served(), this.newId()));
    });
    // a cross-encoder's APIs, at every path vLLM serves them
    for (const path of ['/v1/rerank', '/rerank', '/v2/rerank']) {
      app.post(path, (res, req) => {
        this.noteRequest(req, path);
        this.answerWhole(res, (text) => rerankAnswer(text, this.served(), this.newId()));
      });
    }
    for (const path of ['/v1/score', '/score']) {
      app.post(path, (res, req) => {
        this.noteRequest(req, path);
        this.answerWhole(res, (text) => scoreAnswer(text, this.served(), this.newId()));
      });
    }
    app.post('/classify', (res, req) => {
      this.noteRequest(req, '/classify');
      this.answerWhole(res, (text) => classifyAnswer(text, this.served(), this.newId()));
    });
    app.post('/pooling', (res, req) => {
      this.noteRequest(req, '/pooling');
      this.answerWhole(res, (text) => poolingAnswer(text, this.served(), this.newId()));
    });
    app.post('/v1/responses', (res, req) => {
      this.noteRequest(req, '/v1/responses');
      this.answerWhole(res, (text) => this.runInBackground(responsesAnswer(text, this.served(), this.newId(), this.responses)));
    });
    // a stored answer's retrieve and cancel, as vLLM serves them (apis.ts); the id percent-decoded as Starlette does
    app.get('/v1/responses/:id', (res, req) => {
      this.noteRequest(req, '/v1/responses/{id}');
      const id = pathSegment(req.getParameter(0) ?? '');
      const query = req.getQuery() ?? '';
      this.answerWhole(res, () => retrieveAnswer(id, query, this.responses), false);
    });
    app.post('/v1/responses/:id/cancel', (res, req) => {
      this.noteRequest(req, '/v1/responses/{id}/cancel');
      const id = pathSegment(req.getParameter(0) ?? '');
      this.answerWhole(res, () => cancelAnswer(id, this.responses));
    });
    for (const kind of ['transcriptions', 'translations'] as const) {
      const path = `/v1/audio/${kind}`;
      app.post(path, (res, req) => {
        this.noteRequest(req, path);
        this.answerForm(res, kind, req.getHeader('content-type'));
      });
    }
    app.post('/tokenize', (res, req) => {
      this.noteRequest(req, '/tokenize');
      this.answerWhole(res, (text) => tokenizeAnswer(text, this.served()));
    });
    app.post('/detokenize', (res, req) => {
      this.noteRequest(req, '/detokenize');
      this.answerWhole(res, (text) => detokenizeAnswer(text, this.served()));
    });
    app.get('/mock/requests', (res) => this.send(res, 200, JSON.stringify({ requests: this.seen })));
    app.get('/v1/models', (res) => this.send(res, 200, modelsBody(this.model, this.loras, this.engine.profile.maxModelLen, Math.floor(Date.now() / 1000))));
    app.get('/health', (res) => this.send(res, 200, '', 'text/plain'));
    app.get('/metrics', (res) => this.scrape(res));
    app.get('/mock/faults', (res) => this.send(res, 200, JSON.stringify(this.faults.json())));
    app.post('/mock/faults', (res) => this.setFaults(res));
    app.get('/mock/state', (res) => this.send(res, 200, JSON.stringify({ endpoint: this.endpoint, ...this.engine.snapshot(), faults: this.faults.json(), vnow: this.vnow(), completions: this.completionsSeen, aborted: this.abortedByClient, stored_responses: this.responses.size })));
    // HEAD as vLLM's server (Starlette) answers it: on every GET route, without a body
    app.head('/v1/models', (res) => this.send(res, 200, '', 'application/json', true));
    app.head('/health', (res) => this.send(res, 200, '', 'text/plain', true));
    app.head('/metrics', (res) => this.send(res, 200, '', METRICS_CONTENT_TYPE, true));
    app.any('/*', (res, req) => this.send(res, 404, JSON.stringify({ detail: 'Not Found' }), 'application/json', req.getMethod() === 'head'));
  }

  /** The trace headers of the last SEEN_KEPT inference requests, oldest first (GET /mock/requests). */
  private readonly seen: SeenRequest[] = [];

  private noteRequest(req: { getHeader(name: string): string }, path: string): void {
    const header = (name: string) => req.getHeader(name) || undefined;
    if (this.seen.length >= SEEN_KEPT) this.seen.shift();
    this.seen.push({ path, x_request_id: header('x-request-id'), traceparent: header('traceparent'), tracestate: header('tracestate') });
  }

  /**
   * A speech-to-text request: its multipart body read (with the runtime's fetch form parser, as a
   * Starlette server reads one), then answered as audioAnswer says; the faults apply as to the others.
   */
  private answerForm(res: Res, kind: AudioKind, contentType: string): void {
    const started = this.startWhole(res);
    if (started === null) return;
    const { state, fault } = started;
    this.readBytes(res, state, (raw) => {
      if (fault === '500') return this.sendError(res, 500, 'mock: injected failure');
      readForm(raw, contentType).then(
        (form) => {
          if (state.aborted) return;
          if (form === null) return this.sendError(res, 400, 'There was an error parsing the body');
          this.sendAnswer(res, audioAnswer(kind, form, this.served(), this.newId()));
        },
        (err: unknown) => {
          if (!state.aborted) this.sendError(res, 500, `mock: ${(err as Error).message}`);
        },
      );
    });
  }

  /** Read a whole body as bytes, then call `done` (not called if aborted or too large). */
  private readBytes(res: Res, state: { aborted: boolean }, done: (body: Buffer) => void): void {
    let parts: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (state.aborted || size < 0) return;
      size += chunk.byteLength;
      if (size > this.maxBody) {
        size = -1;
        this.sendError(res, 413, `Request body too large (limit ${this.maxBody} bytes)`);
        state.aborted = true;
        return;
      }
      parts.push(Buffer.from(new Uint8Array(chunk))); // (a copy: uWS reuses the chunk)
      if (isLast) {
        const whole = Buffer.concat(parts);
        parts = [];
        done(whole);
      }
    });
  }

  /** Read a whole body as text (UTF-8; a leading byte-order mark dropped), then call `done` as readBytes does. */
  private readBody(res: Res, state: { aborted: boolean }, done: (body: string) => void): void {
    this.readBytes(res, state, (raw) => done(textDecoder.decode(raw)));
  }


  private setFaults(res: Res): void {
    const state = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    this.readBody(res, state, (text) => {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return this.sendError(res, 400, 'invalid JSON');
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body)) return this.sendError(res, 400, 'expected a JSON object');
      const b = body as Record<string, unknown>;
      const problem = this.faults.apply(b);
      if (b.metrics === 'ok' || b.metrics === 'error') {
        // release hung scrapes: answer them now
        for (const r of [...this.hungMetrics]) this.answerMetrics(r);
        this.hungMetrics.clear();
      }
      if (problem) return this.sendError(res, 400, problem.message, problem.param);
      this.send(res, 200, JSON.stringify(this.faults.json()));
    });
  }

  private scrape(res: Res): void {
    const mode = this.faults.metrics;
    if (mode === 'hang') {
      this.hungMetrics.add(res);
      res.onAborted(() => this.hungMetrics.delete(res));
      return;
    }
    if (mode === 'error') return this.sendError(res, 500, 'mock: injected metrics failure');
    this.answerMetrics(res);
  }

  private answerMetrics(res: Res): void {
    this.send(res, 200, this.metricsText(), METRICS_CONTENT_TYPE);
  }

  // ---------------------------------------------------------------- embeddings, tokenize, responses

  /** What admission knows of this server. */
  private served(): ServedModel {
    const profile = this.engine.profile;
    return {
      model: this.model,
      loras: this.loras,
      seed: this.seed,
      maxModelLen: profile.maxModelLen,
      kvCapacityTokens: profile.numGpuBlocks * profile.blockSize,
    };
  }

  private newId(): string {
    return `${this.port.toString(16)}${(this.nextId++).toString(16).padStart(12, '0')}`;
  }

  /**
   * A background Responses API answer (`background: true`) is generated meanwhile: it completes after its
   * tokens' decode time (the profile's decode_ms each, over --time-scale), unless cancelled before.
   */
  private runInBackground(a: ApiAnswer): ApiAnswer {
    if (a.status !== 200 || a.background === undefined) return a;
    const { id, tokens } = a.background;
    const timer = setTimeout(() => {
      this.backgroundTimers.delete(timer);
      this.responses.complete(id);
    }, (tokens * this.engine.profile.decodeMs) / this.timeScale);
    timer.unref();
    this.backgroundTimers.add(timer);
    return a;
  }

  /**
   * A request to be answered whole: its abort flag, and the fault it meets; null when that fault refused
   * or cut the connection already.
   */
  private startWhole(res: Res): { state: { aborted: boolean }; fault: ReturnType<Faults['pick']> } | null {
    const state = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const fault = this.faults.pick();
    if (fault === 'refuse' || fault === 'cut') {
      state.aborted = true;
      res.close();
      return null;
    }
    return { state, fault };
  }

  private sendAnswer(res: Res, a: ApiAnswer): void {
    if (a.status === 200) this.send(res, 200, a.body, a.contentType);
    else this.sendError(res, a.status, a.refusal.message, a.refusal.param, a.refusal.type);
  }

  /**
   * A request answered whole as soon as its body is in (apis.ts), or at once for a request without one
   * (`readsBody` false: a GET); the injected faults apply as to completions.
   */
  private answerWhole(res: Res, answer: (text: string) => ApiAnswer, readsBody = true): void {
    const started = this.startWhole(res);
    if (started === null) return;
    const { state, fault } = started;
    const reply = (text: string) => {
      if (fault === '500') return this.sendError(res, 500, 'mock: injected failure');
      let a: ApiAnswer;
      try {
        a = answer(text);
      } catch (err) {
        return this.sendError(res, 500, `mock: ${(err as Error).message}`);
      }
      this.sendAnswer(res, a);
    };
    if (readsBody) this.readBody(res, state, reply);
    else reply('');
  }

  // ---------------------------------------------------------------- completions

  private completion(res: Res, chat: boolean): void {
    const state: { aborted: boolean; reply: Reply | null } = { aborted: false, reply: null };
    this.completionsSeen++;
    res.onAborted(() => {
      state.aborted = true;
      const r = state.reply;
      if (r && !r.gone) {
        this.abortedByClient++;
        r.gone = true;
        this.drop(r, true);
      }
    });
    const fault = this.faults.pick();
    if (fault === 'refuse') {
      state.aborted = true;
      res.close();
      return;
    }
    this.readBody(res, state, (text) => {
      if (fault === '500') return this.sendError(res, 500, 'mock: injected failure');
      state.reply = this.start(res, text, chat, fault === 'cut');
    });
  }

  /** Admit a request and give it to the engine; null when an error was sent. */
  private start(res: Res, text: string, chat: boolean, cut: boolean): Reply | null {
    const admission = admit(text, chat ? 'chat' : 'completions', this.served());
    if (!admission.ok) {
      const { status, message, param } = admission.refusal;
      this.sendError(res, status, message, param);
      return null;
    }
    const req = admission.request;
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${this.port.toString(16)}${(this.nextId++).toString(16).padStart(12, '0')}`;
    const r = newReply(res, id, chat, req, this.vnow(), cut);
    this.engine.add({ id, promptTokens: req.tokens, maxTokens: req.maxTokens, lora: req.lora }, r.arrivalV);
    this.replies.add(r);
    this.driver.kick();
    return r;
  }

  /** Take a request out of the engine: client gone (abort) or cut by fault injection. */
  private drop(r: Reply, abort: boolean): void {
    if (!this.replies.remove(r)) return;
    this.engine.abort(r.id, this.vnow());
    if (abort) this.metrics.countFinished('abort');
    this.driver.kick();
  }

  /** One engine step's events: latency metrics, and the answers' output. */
  private onStepEvents(events: EngineEvent[]): void {
    const m = this.metrics;
    for (let i = 0; i < events.length; i++) {
      const ev = events[i];
      const r = this.replies.get(ev.id);
      if (r === undefined) continue;
      switch (ev.type) {
        case 'scheduled':
          if (!r.queued) {
            r.queued = true;
            m.queue.observe(Math.max(0, ev.at - r.arrivalV) / 1000);
          }
          break;
        case 'first_token':
          r.cachedTokens = ev.cachedTokens;
          m.ttft.observe(Math.max(0, ev.at - r.arrivalV) / 1000);
          break;
        case 'token':
          if (ev.index > 0) m.itl.observe(Math.max(0, ev.at - r.lastV) / 1000);
          r.lastV = ev.at;
          this.replies.token(r, ev.index);
          break;
        case 'finished':
          m.e2e.observe(Math.max(0, ev.at - r.arrivalV) / 1000);
          m.countFinished(r.finishReason);
          this.replies.finished(r);
          break;
        case 'preempted':
          break;
      }
    }
  }
}

/** A path segment percent-decoded (as Starlette decodes the path); as it came when its encoding is broken. */
function pathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
