/**
 * A minimal, fast test upstream for the `overhead` scenario: answers `POST /v1/chat/completions` at once,
 * with a ~1 KB chat-completion JSON, or (when the body asks for `"stream": true`) a 20-event SSE stream,
 * one event per event-loop turn (as a model server emits tokens: each event its own send, so a proxy
 * relays 21 chunks rather than one). Also `GET /metrics` (zeroed vLLM gauges, so a scraping gateway is content) and
 * `GET /v1/models`. It models no GPU time: it is here so the proxy, not the upstream, is what is measured.
 *
 * Paced mode, for the `streams` scenario (`--events E --rate R`): a streaming request is answered with E
 * events sent R per second, as a model server decodes a long answer, each event its own write and carrying
 * `"t"` (this machine's monotonic clock, µs, when it was sent) and `"n"` (its index) as its first two fields, so
 * that a client can tell the delay each event saw and whether the stream arrived whole. One timer drives all
 * paced streams (streams are kept in per-millisecond slots by their next due time), so thousands of them cost
 * one wake-up per millisecond, not one timer per event.
 *
 * Run as a process with the bench CLI's hidden subcommand `upstream --port N [--model NAME] [--events E
 * --rate R]`; it prints `upstream listening on http://127.0.0.1:N`.
 */
import type { HttpResponse } from 'uWebSockets.js';
import { loadUws } from '../src/common/uws.js';
import { listenExclusive } from '../src/common/listen.js';

export const UPSTREAM_MODEL = 'bench-model';

export function jsonAnswer(model: string): string {
  // Padded to about 1 KB, like a short real completion.
  const content = 'The quick brown fox jumps over the lazy dog. '.repeat(17).trim();
  return JSON.stringify({
    id: 'chatcmpl-bench-0001',
    object: 'chat.completion',
    created: 1700000000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 200, total_tokens: 212 },
  });
}

/** The SSE answer as its separate events (the last one is `data: [DONE]`). */
export function sseEvents(model: string, events = 20): string[] {
  const out: string[] = [];
  for (let i = 0; i < events; i++) {
    const chunk = {
      id: 'chatcmpl-bench-0001',
      object: 'chat.completion.chunk',
      created: 1700000000,
      model,
      choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: 'tok' } : { content: ` tok${i}` }, finish_reason: i === events - 1 ? 'stop' : null }],
    };
    out.push(`data: ${JSON.stringify(chunk)}\n\n`);
  }
  out.push('data: [DONE]\n\n');
  return out;
}

export function sseAnswer(model: string, events = 20): string {
  return sseEvents(model, events).join('');
}

/** This machine's monotonic clock in µs (CLOCK_MONOTONIC, the same in every process: comparable across them). */
export function monotonicUs(): number {
  const [sec, ns] = process.hrtime();
  return sec * 1e6 + Math.floor(ns / 1e3);
}

/**
 * Event `n` of a paced answer of `total` events: an OpenAI chat-completion chunk (about 230 bytes, like a
 * real server's) whose first two fields are the send time `t` (µs, `monotonicUs`) and the index `n`.
 */
export function pacedEvent(model: string, n: number, total: number, tUs: number): string {
  const delta = n === 0 ? '{"role":"assistant","content":""}' : `{"content":" tok${n}"}`;
  return `data: {"t":${tUs},"n":${n},"id":"chatcmpl-bench-0001","object":"chat.completion.chunk","created":1700000000,"model":${JSON.stringify(model)},"system_fingerprint":null,"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${n === total - 1 ? '"stop"' : 'null'}}]}\n\n`;
}

export interface PacedOptions {
  /** events per streamed answer (the last one followed by `data: [DONE]`) */
  events: number;
  /** events per second of each stream */
  rate: number;
}

interface PacedStream {
  res: HttpResponse;
  /** index of the next event */
  n: number;
  /** performance.now() of the first event */
  t0: number;
  gone: boolean;
}

/**
 * Sends the events of all paced streams when due: streams wait in per-millisecond slots (keyed by the
 * millisecond their next event is due), and one 1 ms interval, running only while streams are open, sends
 * what is due and files each stream under its next slot.
 */
class Pacer {
  private readonly slots = new Map<number, PacedStream[]>();
  private next = 0; // the first slot not yet sent
  private open = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly intervalMs: number;
  constructor(private readonly model: string, private readonly o: PacedOptions) {
    this.intervalMs = 1000 / o.rate;
  }
  start(res: HttpResponse): void {
    const s: PacedStream = { res, n: 0, t0: performance.now(), gone: false };
    res.onAborted(() => {
      if (!s.gone) { s.gone = true; this.closed(); }
    });
    this.open++;
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream').writeHeader('cache-control', 'no-cache');
      this.send(s);
    });
    if (!s.gone) this.file(s);
    if (!this.timer && this.open > 0) {
      this.next = Math.floor(performance.now());
      this.timer = setInterval(() => this.tick(), 1);
    }
  }
  private closed(): void {
    if (--this.open === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.slots.clear();
    }
  }
  /** Writes event s.n (and, after the last, [DONE] and the end). Inside a cork. */
  private send(s: PacedStream): void {
    const ev = pacedEvent(this.model, s.n, this.o.events, monotonicUs());
    s.n++;
    if (s.n < this.o.events) {
      s.res.write(ev);
      return;
    }
    s.res.end(ev + 'data: [DONE]\n\n');
    s.gone = true;
    this.closed();
  }
  private file(s: PacedStream): void {
    const due = Math.floor(s.t0 + s.n * this.intervalMs);
    const slot = Math.max(due, this.next);
    const list = this.slots.get(slot);
    if (list) list.push(s);
    else this.slots.set(slot, [s]);
  }
  private tick(): void {
    const upto = Math.floor(performance.now());
    for (; this.next <= upto && this.timer; this.next++) {
      const list = this.slots.get(this.next);
      if (!list) continue;
      this.slots.delete(this.next);
      for (const s of list) {
        if (s.gone) continue;
        s.res.cork(() => this.send(s));
        if (!s.gone) this.file(s);
      }
    }
  }
}

const METRICS = [
  '# TYPE vllm:num_requests_running gauge',
  'vllm:num_requests_running{model_name="MODEL"} 0',
  '# TYPE vllm:num_requests_waiting gauge',
  'vllm:num_requests_waiting{model_name="MODEL"} 0',
  '# TYPE vllm:kv_cache_usage_perc gauge',
  'vllm:kv_cache_usage_perc{model_name="MODEL"} 0',
  '',
].join('\n');

export function startUpstream(port: number, model = UPSTREAM_MODEL, paced?: PacedOptions): Promise<void> {
  const json = Buffer.from(jsonAnswer(model));
  const sse = sseEvents(model).map((e) => Buffer.from(e));
  const metrics = METRICS.replaceAll('MODEL', model);
  const models = JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', owned_by: 'bench' }] });
  const uWS = loadUws(); // refuses the slow fallback
  const pacer = paced ? new Pacer(model, paced) : null;
  const app = uWS.App();
  app.post('/*', (res) => {
    let aborted = false;
    let body = '';
    res.onAborted(() => { aborted = true; });
    res.onData((ab, last) => {
      body += Buffer.from(ab).toString('latin1');
      if (!last || aborted) return;
      const stream = /"stream"\s*:\s*true/.test(body);
      if (stream && pacer) {
        pacer.start(res);
        return;
      }
      if (stream) {
        res.cork(() => {
          res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream').writeHeader('cache-control', 'no-cache');
          res.write(sse[0]);
        });
        let i = 1;
        const next = (): void => {
          if (aborted) return;
          res.cork(() => {
            if (i < sse.length - 1) res.write(sse[i]);
            else res.end(sse[i]);
          });
          if (++i < sse.length) setImmediate(next);
        };
        setImmediate(next);
        return;
      }
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(json);
      });
    });
  });
  app.get('/metrics', (res) => { res.writeHeader('content-type', 'text/plain; version=0.0.4').end(metrics); });
  app.get('/v1/models', (res) => { res.writeHeader('content-type', 'application/json').end(models); });
  app.get('/health', (res) => { res.end('ok'); });
  app.any('/*', (res) => { res.writeStatus('404 Not Found').end('not found'); });
  return new Promise((resolve, reject) => {
    listenExclusive(app, '127.0.0.1', port, (sock) => (sock ? resolve() : reject(new Error(`upstream: cannot listen on ${port}`))));
  });
}

