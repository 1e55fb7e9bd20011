/**
 * A minimal, fast test upstream for the `overhead` scenario: answers `POST /v1/chat/completions` at once,
 * with a ~1 KB chat-completion JSON, or (when the body asks for `"stream": true`) a 20-event SSE stream,
 * one event per event-loop turn (as a model server emits tokens: each event its own send, so a proxy
 * relays 21 chunks rather than one). Also `GET /metrics` (zeroed vLLM gauges, so a scraping gateway is content) and
 * `GET /v1/models`. It models no GPU time: it is here so the proxy, not the upstream, is what is measured.
 *
 * Run as a process with the bench CLI's hidden subcommand `upstream --port N [--model NAME]`; it prints
 * `upstream listening on http://127.0.0.1:N`.
 */
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

const METRICS = [
  '# TYPE vllm:num_requests_running gauge',
  'vllm:num_requests_running{model_name="MODEL"} 0',
  '# TYPE vllm:num_requests_waiting gauge',
  'vllm:num_requests_waiting{model_name="MODEL"} 0',
  '# TYPE vllm:kv_cache_usage_perc gauge',
  'vllm:kv_cache_usage_perc{model_name="MODEL"} 0',
  '',
].join('\n');

export function startUpstream(port: number, model = UPSTREAM_MODEL): Promise<void> {
  const json = Buffer.from(jsonAnswer(model));
  const sse = sseEvents(model).map((e) => Buffer.from(e));
  const metrics = METRICS.replaceAll('MODEL', model);
  const models = JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', owned_by: 'bench' }] });
  const uWS = loadUws(); // refuses the slow fallback
  const app = uWS.App();
  app.post('/*', (res) => {
    let aborted = false;
    let body = '';
    res.onAborted(() => { aborted = true; });
    res.onData((ab, last) => {
      body += Buffer.from(ab).toString('latin1');
      if (!last || aborted) return;
      const stream = /"stream"\s*:\s*true/.test(body);
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

