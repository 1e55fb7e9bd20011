/**
 * One simulated vLLM server: a uWS app in front of one `Engine`, advanced in real time (× timeScale).
 *
 * Clock: the engine runs in "model time" = real time since start × timeScale, in ms. One timer per server
 * per engine step; when the process falls behind (short steps at a high time scale), several steps are
 * run back to back in one timer callback, and every response's output of that callback is written once,
 * corked. Latency metrics (TTFT, ITL, e2e, queue) are observed in model time, as a real vLLM would see them.
 */
import type uWS from 'uWebSockets.js';
import { loadUws } from '../common/uws.js';
import { Engine, tokenize, type EngineEvent, type EngineSnapshot } from '../engine/index.js';
import { renderPrompt } from '../openai/prompt.js';
import {
  counter,
  gauge,
  Histogram,
  ITL_BUCKETS,
  REQUEST_LATENCY_BUCKETS,
  TTFT_BUCKETS,
} from './prom.js';
import { naturalLength, requestKey, TOKEN_JSON, TOKEN_TEXT, tokenWord } from './text.js';
import { profileFromOptions, type FailMode, type MetricsFault, type MockOptions } from './options.js';
import { listenExclusive } from '../common/listen.js';

/** HOST:PORT as an endpoint is written (an IPv6 address in brackets). */
function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

type Res = uWS.HttpResponse;
type Req = uWS.HttpRequest;

/** Most a response may hold back while its client doesn't read (beyond that it is cut off). */
const MAX_PENDING_CHARS = 8 * 1024 * 1024;
const MAX_CATCHUP_STEPS = 2000;

interface Active {
  id: string;
  res: Res;
  chat: boolean;
  stream: boolean;
  includeUsage: boolean;
  model: string;
  created: number;
  key: number;
  promptTokens: number;
  maxTokens: number;
  finishReason: 'length' | 'stop';
  arrivalV: number;
  queued: boolean;
  lastV: number;
  outTokens: number;
  cachedTokens: number;
  cutAt: number;
  /** chunk prefix `data: {"id":...,"choices":[{"index":0,` */
  head: string;
  buf: string;
  text: string;
  done: boolean;
  cut: boolean;
  gone: boolean;
  bp: boolean;
  writableSet: boolean;
  pending: string;
}

interface Faults {
  metrics: MetricsFault;
  failRate: number;
  failMode: FailMode;
}

const textDecoder = new TextDecoder();

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
  private readonly app: uWS.TemplatedApp;
  private listenSocket: uWS.us_listen_socket | null = null;
  private readonly scale: number;
  private readonly seed: number;
  private readonly t0 = performance.now();
  private readonly maxBody: number;
  private readonly active = new Map<string, Active>();
  private readonly touched = new Set<Active>();
  private readonly hungMetrics = new Set<Res>();
  private timer: NodeJS.Timeout | null = null;
  private hangTimer: NodeJS.Timeout | null = null;
  private stepEndV = 0;
  private nextId = 1;
  private rng: number;
  private closed = false;
  readonly faults: Faults;
  /** SSE data events written (for throughput measurement) */
  sseEvents = 0;

  private readonly ttft = new Histogram(TTFT_BUCKETS);
  private readonly itl = new Histogram(ITL_BUCKETS);
  private readonly e2e = new Histogram(REQUEST_LATENCY_BUCKETS);
  private readonly queue = new Histogram(REQUEST_LATENCY_BUCKETS);
  private readonly success = new Map<string, number>([
    ['stop', 0],
    ['length', 0],
    ['abort', 0],
  ]);

  constructor(opts: MockOptions, host: string, port: number) {
    if (!opts.model) throw new Error('mock: model is required');
    this.engine = new Engine(profileFromOptions(opts));
    this.model = opts.model;
    this.loras = [...this.engine.profile.loras];
    this.host = host;
    this.port = port;
    this.endpoint = hostPort(host, port);
    this.scale = opts.timeScale ?? 1;
    if (!(this.scale > 0)) throw new Error('mock: timeScale must be > 0');
    this.seed = opts.seed ?? 0;
    this.maxBody = opts.maxBodyBytes ?? 64 * 1024 * 1024;
    this.rng = ((this.seed * 2654435761) ^ port ^ 0x5bd1e995) >>> 0 || 1;
    this.faults = { metrics: 'ok', failRate: opts.failRate ?? 0, failMode: opts.failMode ?? 'mixed' };
    if (opts.metricsHangAfterS !== undefined && opts.metricsHangAfterS >= 0) {
      this.hangTimer = setTimeout(() => {
        this.faults.metrics = 'hang';
      }, opts.metricsHangAfterS * 1000);
      this.hangTimer.unref();
    }
    this.app = loadUws().App();
    this.routes();
  }

  /** model time now, ms */
  vnow(): number {
    return (performance.now() - this.t0) * this.scale;
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
    if (this.timer) clearTimeout(this.timer);
    if (this.hangTimer) clearTimeout(this.hangTimer);
    this.timer = null;
    if (this.listenSocket) loadUws().us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    for (const a of [...this.active.values()]) {
      if (!a.gone) a.res.close();
    }
    for (const r of [...this.hungMetrics]) r.close();
    this.hungMetrics.clear();
    // close idle keep-alive connections too (present at run time in this uWS build, untyped)
    const app = this.app as unknown as { close?: () => void };
    if (typeof app.close === 'function') app.close();
  }

  snapshot(): EngineSnapshot {
    return this.engine.snapshot();
  }

  private random(): number {
    let x = this.rng;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rng = x >>> 0;
    return this.rng / 4294967296;
  }

  private pickFault(): 'none' | 'refuse' | '500' | 'cut' {
    const f = this.faults;
    if (f.failRate <= 0 || this.random() >= f.failRate) return 'none';
    if (f.failMode !== 'mixed') return f.failMode;
    const r = this.random();
    return r < 1 / 3 ? 'refuse' : r < 2 / 3 ? '500' : 'cut';
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

  private sendError(res: Res, status: number, message: string, param: string | null = null): void {
    this.send(res, status, errorBody(message, ERROR_TYPE[status] ?? 'Error', status, param));
  }

  private routes(): void {
    const app = this.app;
    app.post('/v1/chat/completions', (res, req) => this.completion(res, req, true));
    app.post('/v1/completions', (res, req) => this.completion(res, req, false));
    app.get('/v1/models', (res) => this.send(res, 200, this.modelsBody()));
    app.get('/health', (res) => this.send(res, 200, '', 'text/plain'));
    app.get('/metrics', (res) => this.metrics(res));
    app.get('/mock/faults', (res) => this.send(res, 200, JSON.stringify(this.faultsJson())));
    app.post('/mock/faults', (res) => this.setFaults(res));
    app.get('/mock/state', (res) => this.send(res, 200, JSON.stringify({ endpoint: this.endpoint, ...this.engine.snapshot(), faults: this.faultsJson(), vnow: this.vnow() })));
    // HEAD as vLLM's server (Starlette) answers it: on every GET route, without a body
    app.head('/v1/models', (res) => this.send(res, 200, '', 'application/json', true));
    app.head('/health', (res) => this.send(res, 200, '', 'text/plain', true));
    app.head('/metrics', (res) => this.send(res, 200, '', 'text/plain; version=0.0.4; charset=utf-8', true));
    app.any('/*', (res, req) => this.send(res, 404, JSON.stringify({ detail: 'Not Found' }), 'application/json', req.getMethod() === 'head'));
  }

  private faultsJson() {
    return { metrics: this.faults.metrics, fail_rate: this.faults.failRate, fail_mode: this.faults.failMode };
  }

  private modelsBody(): string {
    const created = Math.floor(Date.now() / 1000);
    const maxLen = this.engine.profile.maxModelLen;
    const card = (id: string, root: string, parent: string | null) => ({
      id,
      object: 'model',
      created,
      owned_by: 'vllm',
      root,
      parent,
      max_model_len: parent === null ? maxLen : undefined,
      permission: [
        {
          id: `modelperm-${id}`,
          object: 'model_permission',
          created,
          allow_create_engine: false,
          allow_sampling: true,
          allow_logprobs: true,
          allow_search_indices: false,
          allow_view: true,
          allow_fine_tuning: false,
          organization: '*',
          group: null,
          is_blocking: false,
        },
      ],
    });
    const data = [card(this.model, this.model, null), ...this.loras.map((l) => card(l, `/adapters/${l}`, this.model))];
    return JSON.stringify({ object: 'list', data });
  }

  /** Read a whole body, then call `done` (not called if aborted or too large). */
  private readBody(res: Res, state: { aborted: boolean }, done: (body: string) => void): void {
    let parts: Uint8Array[] | null = null;
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
      if (isLast && parts === null) {
        done(textDecoder.decode(chunk));
        return;
      }
      (parts ??= []).push(new Uint8Array(chunk.slice(0)));
      if (isLast) done(Buffer.concat(parts).toString('utf8'));
    });
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
      if (b.metrics !== undefined) {
        if (b.metrics !== 'ok' && b.metrics !== 'hang' && b.metrics !== 'error') return this.sendError(res, 400, 'metrics must be ok, hang or error', 'metrics');
        this.faults.metrics = b.metrics;
        if (b.metrics !== 'hang') {
          // release hung scrapes: answer them now
          for (const r of [...this.hungMetrics]) this.answerMetrics(r);
          this.hungMetrics.clear();
        }
      }
      if (b.fail_rate !== undefined) {
        if (typeof b.fail_rate !== 'number' || !(b.fail_rate >= 0 && b.fail_rate <= 1)) return this.sendError(res, 400, 'fail_rate must be a number in [0, 1]', 'fail_rate');
        this.faults.failRate = b.fail_rate;
      }
      if (b.fail_mode !== undefined) {
        if (!['refuse', '500', 'cut', 'mixed'].includes(b.fail_mode as string)) return this.sendError(res, 400, 'fail_mode must be refuse, 500, cut or mixed', 'fail_mode');
        this.faults.failMode = b.fail_mode as FailMode;
      }
      this.send(res, 200, JSON.stringify(this.faultsJson()));
    });
  }

  private metrics(res: Res): void {
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
    this.send(res, 200, this.metricsText(), 'text/plain; version=0.0.4; charset=utf-8');
  }

  metricsText(): string {
    const s = this.engine.snapshot();
    const L = { model_name: this.model, engine: '0' };
    let out = '';
    out += gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', [[L, s.running]]);
    out += gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', [[L, s.waiting]]);
    out += gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', [[L, s.kvUsage]]);
    out += gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage. (deprecated: use vllm:kv_cache_usage_perc)', [[L, s.kvUsage]]);
    out += counter('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.', [[L, s.prefixQueries]]);
    out += counter('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.', [[L, s.prefixHits]]);
    out += counter('vllm:gpu_prefix_cache_queries_total', 'GPU prefix cache queries, in terms of number of queried tokens. (deprecated)', [[L, s.prefixQueries]]);
    out += counter('vllm:gpu_prefix_cache_hits_total', 'GPU prefix cache hits, in terms of number of cached tokens. (deprecated)', [[L, s.prefixHits]]);
    out += counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.', [[L, s.preemptionsTotal]]);
    out += counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.', [[L, s.promptTokensTotal]]);
    out += counter('vllm:generation_tokens_total', 'Number of generation tokens processed.', [[L, s.generationTokensTotal]]);
    out += counter(
      'vllm:request_success_total',
      'Count of successfully processed requests.',
      [...this.success].map(([reason, v]) => [{ ...L, finished_reason: reason }, v] as [Record<string, string>, number]),
    );
    out += gauge('vllm:lora_requests_info', 'Running stats on lora requests.', [
      [
        {
          max_lora: String(s.maxLoras),
          running_lora_adapters: s.loraRunning.join(','),
          waiting_lora_adapters: s.loraWaiting.join(','),
        },
        Date.now() / 1000,
      ],
    ]);
    out += gauge('vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', [
      [
        {
          block_size: String(s.blockSize),
          cache_dtype: 'auto',
          enable_prefix_caching: 'True',
          engine: '0',
          gpu_memory_utilization: '0.9',
          num_cpu_blocks: '0',
          num_gpu_blocks: String(s.numGpuBlocks),
          prefix_caching_hash_algo: 'builtin',
        },
        1,
      ],
    ]);
    out += this.ttft.render('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', L);
    out += this.itl.render('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', L);
    out += this.itl.render('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds. (deprecated: use vllm:inter_token_latency_seconds)', L);
    out += this.e2e.render('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', L);
    out += this.queue.render('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', L);
    return out;
  }

  // ---------------------------------------------------------------- completions

  private completion(res: Res, _req: Req, chat: boolean): void {
    const state: { aborted: boolean; active: Active | null } = { aborted: false, active: null };
    res.onAborted(() => {
      state.aborted = true;
      const a = state.active;
      if (a && !a.gone) {
        a.gone = true;
        this.dropActive(a, true);
      }
    });
    const fault = this.pickFault();
    if (fault === 'refuse') {
      state.aborted = true;
      res.close();
      return;
    }
    this.readBody(res, state, (text) => {
      if (fault === '500') return this.sendError(res, 500, 'mock: injected failure');
      const a = this.admit(res, text, chat, fault === 'cut');
      if (a) state.active = a;
    });
  }

  /** Validate like vLLM, register with the engine; null when an error was sent. */
  private admit(res: Res, text: string, chat: boolean, cut: boolean): Active | null {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (e) {
      this.sendError(res, 400, `JSON decode error: ${(e as Error).message}`);
      return null;
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      this.sendError(res, 400, 'Input should be a valid dictionary or object to extract fields from');
      return null;
    }
    const b = body as Record<string, unknown>;
    let lora: string | undefined;
    const model = b.model === undefined || b.model === null ? this.model : b.model;
    if (typeof model !== 'string') {
      this.sendError(res, 400, 'model: Input should be a valid string', 'model');
      return null;
    }
    if (model !== this.model) {
      if (!this.loras.includes(model)) {
        this.sendError(res, 404, `The model \`${model}\` does not exist.`, 'model');
        return null;
      }
      lora = model;
    }
    if (chat) {
      if (!Array.isArray(b.messages) || b.messages.length === 0) {
        this.sendError(res, 400, 'messages: Field required (a non-empty list)', 'messages');
        return null;
      }
    } else if (typeof b.prompt !== 'string' && !Array.isArray(b.prompt)) {
      this.sendError(res, 400, 'prompt: Field required (a string or a list)', 'prompt');
      return null;
    }
    if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') {
      this.sendError(res, 400, 'stream: Input should be a valid boolean', 'stream');
      return null;
    }
    if (b.n !== undefined && b.n !== null && b.n !== 1) {
      // vLLM runs n > 1 as n sequences; the mock's engine models one per request, so it says so rather
      // than answering one choice where n were asked for.
      this.sendError(res, 400, 'n: the mock serves n = 1 only (one choice per request).', 'n');
      return null;
    }
    const mtRaw = b.max_completion_tokens ?? b.max_tokens;
    const mtParam = b.max_completion_tokens !== undefined && b.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
    if (mtRaw !== undefined && mtRaw !== null && (typeof mtRaw !== 'number' || !Number.isInteger(mtRaw))) {
      this.sendError(res, 400, `${mtParam}: Input should be a valid integer`, mtParam);
      return null;
    }
    if (typeof mtRaw === 'number' && mtRaw < 1) {
      this.sendError(res, 400, `${mtParam} must be at least 1, got ${mtRaw}.`, mtParam);
      return null;
    }
    const tokens = tokenize(renderPrompt(b));
    const promptLen = tokens.length;
    if (promptLen === 0) {
      this.sendError(res, 400, 'The prompt cannot be empty.', 'prompt');
      return null;
    }
    const maxLen = this.engine.profile.maxModelLen;
    const capacity = this.engine.profile.numGpuBlocks * this.engine.profile.blockSize;
    const requested = typeof mtRaw === 'number' ? mtRaw : 0;
    if (promptLen + requested > maxLen || promptLen >= maxLen) {
      const msg =
        typeof mtRaw === 'number'
          ? `This model's maximum context length is ${maxLen} tokens. However, you requested ${promptLen + requested} tokens (${promptLen} in the messages, ${requested} in the completion). Please reduce the length of the messages or completion.`
          : `This model's maximum context length is ${maxLen} tokens. However, your request has ${promptLen} input tokens. Please reduce the length of the input messages.`;
      this.sendError(res, 400, msg, 'input_tokens');
      return null;
    }
    if (promptLen >= capacity) {
      this.sendError(res, 400, `The prompt (${promptLen} tokens) does not fit in the KV cache (${capacity} tokens).`, 'input_tokens');
      return null;
    }
    const seedExtra = typeof b.seed === 'number' && Number.isInteger(b.seed) ? b.seed : 0;
    const key = requestKey(this.seed, model, tokens, seedExtra);
    let maxTokens: number;
    let finishReason: 'length' | 'stop';
    if (typeof mtRaw === 'number') {
      maxTokens = mtRaw;
      finishReason = 'length';
    } else {
      maxTokens = naturalLength(key);
      finishReason = 'stop';
    }
    maxTokens = Math.max(1, Math.min(maxTokens, maxLen - promptLen, capacity - promptLen));
    const stream = b.stream === true;
    const so = b.stream_options as Record<string, unknown> | undefined | null;
    const includeUsage = stream && so !== null && typeof so === 'object' && so.include_usage === true;
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${this.port.toString(16)}${(this.nextId++).toString(16).padStart(12, '0')}`;
    const created = Math.floor(Date.now() / 1000);
    const a: Active = {
      id,
      res,
      chat,
      stream,
      includeUsage,
      model,
      created,
      key,
      promptTokens: promptLen,
      maxTokens,
      finishReason,
      arrivalV: this.vnow(),
      queued: false,
      lastV: 0,
      outTokens: 0,
      cachedTokens: 0,
      cutAt: cut ? Math.floor(maxTokens / 2) : -1,
      head: `data: {"id":"${id}","object":"${chat ? 'chat.completion.chunk' : 'text_completion'}","created":${created},"model":${JSON.stringify(model)},"choices":[{"index":0,`,
      buf: '',
      text: '',
      done: false,
      cut: false,
      gone: false,
      bp: false,
      writableSet: false,
      pending: '',
    };
    this.engine.add({ id, promptTokens: tokens, maxTokens, lora }, a.arrivalV);
    this.active.set(id, a);
    if (stream) {
      res.cork(() => {
        res
          .writeStatus('200 OK')
          .writeHeader('content-type', 'text/event-stream; charset=utf-8')
          .writeHeader('cache-control', 'no-cache')
          .writeHeader('x-mock-endpoint', this.endpoint);
        // uWS sends the status line and headers with the first write
        res.write('');
      });
    }
    this.kick();
    return a;
  }

  /** Remove a request: client gone (abort) or cut by fault injection. */
  private dropActive(a: Active, abort: boolean): void {
    if (!this.active.delete(a.id)) return;
    this.engine.abort(a.id, this.vnow());
    this.touched.delete(a);
    if (abort) this.success.set('abort', (this.success.get('abort') ?? 0) + 1);
    this.kick();
  }

  // ---------------------------------------------------------------- stepping

  private kick(): void {
    if (this.closed || this.timer !== null || this.engine.stepInFlight) return;
    this.startAt(this.vnow());
  }

  private startAt(at: number): boolean {
    const d = this.engine.startStep(at);
    if (d === null) return false;
    this.stepEndV = at + d;
    this.timer = setTimeout(this.onTick, Math.max(0, (this.stepEndV - this.vnow()) / this.scale));
    return true;
  }

  private readonly onTick = (): void => {
    this.timer = null;
    if (this.closed) return;
    let loops = 0;
    for (;;) {
      const end = this.stepEndV;
      this.handleEvents(this.engine.finishStep(end));
      const now = this.vnow();
      // back to back while the real clock is ahead; resync when hopelessly behind
      const start = ++loops >= MAX_CATCHUP_STEPS ? Math.max(end, now) : end;
      const d = this.engine.startStep(start);
      if (d === null) break;
      this.stepEndV = start + d;
      if (this.stepEndV > now || loops >= MAX_CATCHUP_STEPS) {
        this.timer = setTimeout(this.onTick, Math.max(0, (this.stepEndV - now) / this.scale));
        break;
      }
    }
    this.flush();
  };

  private handleEvents(events: EngineEvent[]): void {
    for (let i = 0; i < events.length; i++) {
      const ev = events[i];
      const a = this.active.get(ev.id);
      if (a === undefined) continue;
      switch (ev.type) {
        case 'scheduled':
          if (!a.queued) {
            a.queued = true;
            this.queue.observe(Math.max(0, ev.at - a.arrivalV) / 1000);
          }
          break;
        case 'first_token':
          a.cachedTokens = ev.cachedTokens;
          this.ttft.observe(Math.max(0, ev.at - a.arrivalV) / 1000);
          break;
        case 'token': {
          if (ev.index > 0) this.itl.observe(Math.max(0, ev.at - a.lastV) / 1000);
          a.lastV = ev.at;
          a.outTokens = ev.index + 1;
          const w = tokenWord(a.key, ev.index);
          if (a.stream) {
            const last = ev.index === a.maxTokens - 1;
            if (ev.index === 0 && a.chat) {
              a.buf += a.head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n';
              this.sseEvents++;
            }
            a.buf +=
              a.head +
              (a.chat ? '"delta":{"content":' + TOKEN_JSON[w] + '},"logprobs":null,' : '"text":' + TOKEN_JSON[w] + ',"logprobs":null,') +
              (last ? '"finish_reason":"' + a.finishReason + '","stop_reason":null}]}\n\n' : '"finish_reason":null' + (a.chat ? '' : ',"stop_reason":null') + '}]}\n\n');
            this.sseEvents++;
          } else {
            a.text += TOKEN_TEXT[w];
          }
          if (ev.index === a.cutAt) a.cut = true;
          this.touched.add(a);
          break;
        }
        case 'finished':
          this.e2e.observe(Math.max(0, ev.at - a.arrivalV) / 1000);
          this.success.set(a.finishReason, (this.success.get(a.finishReason) ?? 0) + 1);
          a.done = true;
          this.touched.add(a);
          break;
        case 'preempted':
          break;
      }
    }
  }

  private usage(a: Active): string {
    return `{"prompt_tokens":${a.promptTokens},"total_tokens":${a.promptTokens + a.outTokens},"completion_tokens":${a.outTokens},"prompt_tokens_details":{"cached_tokens":${a.cachedTokens}}}`;
  }

  private flush(): void {
    if (this.touched.size === 0) return;
    for (const a of this.touched) {
      if (a.gone) continue;
      const res = a.res;
      if (a.cut) {
        // fault injection: end the stream midway, without [DONE]
        a.gone = true;
        res.cork(() => {
          if (a.stream && a.buf) this.write(a, a.buf);
          else if (!a.stream) res.writeStatus('200 OK').writeHeader('content-type', 'application/json').writeHeader('x-mock-endpoint', this.endpoint).write('{"id":"' + a.id + '","object":');
        });
        res.close();
        this.dropActive(a, false);
        continue;
      }
      if (a.done) {
        a.gone = true;
        this.active.delete(a.id);
        if (a.stream) {
          let tail = a.buf;
          a.buf = '';
          if (a.outTokens < a.maxTokens) {
            // stopped early (engine cap): close the choice explicitly
            tail += a.head + (a.chat ? '"delta":{},"logprobs":null,' : '"text":"","logprobs":null,') + '"finish_reason":"length","stop_reason":null}]}\n\n';
          }
          if (a.includeUsage) {
            tail += `data: {"id":"${a.id}","object":"${a.chat ? 'chat.completion.chunk' : 'text_completion'}","created":${a.created},"model":${JSON.stringify(a.model)},"choices":[],"usage":${this.usage(a)}}\n\n`;
            this.sseEvents++;
          }
          tail += 'data: [DONE]\n\n';
          this.sseEvents++;
          const out = a.bp ? a.pending + tail : tail;
          a.pending = '';
          res.cork(() => res.end(out));
        } else {
          this.send(res, 200, this.finalBody(a));
        }
        continue;
      }
      if (a.stream && a.buf) {
        const s = a.buf;
        a.buf = '';
        res.cork(() => this.write(a, s));
      }
    }
    this.touched.clear();
  }

  /** Write with bounded buffering: while the client doesn't drain, hold output (up to a limit). */
  private write(a: Active, s: string): void {
    if (a.bp) {
      a.pending += s;
      if (a.pending.length > MAX_PENDING_CHARS && !a.gone) {
        a.gone = true;
        a.res.close();
        this.dropActive(a, true);
      }
      return;
    }
    if (!a.res.write(s)) {
      a.bp = true;
      if (!a.writableSet) {
        a.writableSet = true;
        a.res.onWritable(() => {
          if (a.gone) return true;
          a.bp = false;
          if (a.pending) {
            const p = a.pending;
            a.pending = '';
            if (!a.res.write(p)) a.bp = true;
          }
          return !a.bp;
        });
      }
    }
  }

  private finalBody(a: Active): string {
    const reason = a.outTokens < a.maxTokens ? 'length' : a.finishReason;
    if (a.chat) {
      return `{"id":"${a.id}","object":"chat.completion","created":${a.created},"model":${JSON.stringify(a.model)},"choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(a.text)},"refusal":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"${reason}","stop_reason":null}],"service_tier":null,"system_fingerprint":null,"usage":${this.usage(a)},"prompt_logprobs":null}`;
    }
    return `{"id":"${a.id}","object":"text_completion","created":${a.created},"model":${JSON.stringify(a.model)},"choices":[{"index":0,"text":${JSON.stringify(a.text)},"logprobs":null,"finish_reason":"${reason}","stop_reason":null,"prompt_logprobs":null}],"service_tier":null,"system_fingerprint":null,"usage":${this.usage(a)}}`;
  }
}
