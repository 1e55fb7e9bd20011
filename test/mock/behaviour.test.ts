/**
 * The mock behaves like vLLM where a router can see it: prefix caching, queueing, KV pressure, LoRA slots,
 * aborts, and the metrics that show them (parsed as Prometheus text).
 */
import t from 'tap';
import { Agent, request } from 'undici';
import { startMockServers, type MockOptions } from '../../src/mock/index.js';

const agent = new Agent({ keepAliveTimeout: 1000, connections: 64 });
t.teardown(() => agent.close());

async function start(opts: Partial<MockOptions> = {}) {
  const s = await startMockServers({ port: 0, model: 'm', ...opts });
  t.teardown(() => s.close());
  return s.endpoints[0];
}

async function post(ep: string, body: unknown, signal?: AbortSignal) {
  const r = await request(`http://${ep}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body), dispatcher: agent, signal });
  return r;
}

/** Send a streaming request and resolve when its first content chunk arrives; returns ms and a reader. */
async function streamUntilFirstToken(ep: string, body: Record<string, unknown>, signal?: AbortSignal) {
  const t0 = performance.now();
  const r = await post(ep, { ...body, stream: true }, signal);
  const it = r.body[Symbol.asyncIterator]();
  let text = '';
  while (!text.includes('"content":" ')) {
    const n = await it.next();
    if (n.done) break;
    text += n.value.toString();
  }
  return { ms: performance.now() - t0, rest: async () => { for (;;) { const n = await it.next(); if (n.done) return; } } };
}

interface Sample { name: string; labels: Record<string, string>; value: number }

/** A strict Prometheus text (0.0.4) parser: throws on any malformed line. */
function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  const types = new Map<string, string>();
  let family = '';
  const sampleRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)?\})? (\S+)$/;
  if (!text.endsWith('\n')) throw new Error('no final newline');
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# HELP ')) continue;
    const ty = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (ty) {
      if (types.has(ty[1])) throw new Error(`duplicate TYPE ${ty[1]}`);
      types.set(ty[1], ty[2]);
      family = ty[1];
      continue;
    }
    const m = sampleRe.exec(line);
    if (!m) throw new Error(`bad line: ${line}`);
    const [, name, lbl, v] = m;
    const fam = types.get(family) === 'histogram' ? name.replace(/_(bucket|count|sum)$/, '') : name;
    if (fam !== family) throw new Error(`sample ${name} outside its family (${family})`);
    const value = v === '+Inf' ? Infinity : Number(v);
    if (Number.isNaN(value) && v !== 'NaN') throw new Error(`bad value: ${line}`);
    const labels: Record<string, string> = {};
    if (lbl) for (const p of lbl.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    out.push({ name, labels, value });
  }
  // histograms: cumulative buckets, +Inf equals _count
  for (const [fam, ty] of types) {
    if (ty !== 'histogram') continue;
    const buckets = out.filter((s) => s.name === `${fam}_bucket`);
    for (let i = 1; i < buckets.length; i++) if (buckets[i].value < buckets[i - 1].value) throw new Error(`${fam}: buckets not cumulative`);
    const inf = buckets.find((b) => b.labels.le === '+Inf');
    const count = out.find((s) => s.name === `${fam}_count`);
    if (!inf || !count || inf.value !== count.value) throw new Error(`${fam}: +Inf bucket != count`);
  }
  return out;
}

async function metrics(ep: string) {
  const r = await request(`http://${ep}/metrics`, { dispatcher: agent });
  t.match(r.headers['content-type'], /^text\/plain/);
  return parseProm(await r.body.text());
}
const val = (ms: Sample[], name: string, labels: Record<string, string> = {}) =>
  ms.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

/** Wait for a condition with a deadline (never sleep-and-hope). */
async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('metrics: vLLM names, model_name label, valid Prometheus text', async (t) => {
  const ep = await start({ model: 'llama', lora: ['x'], timeScale: 20 });
  await (await post(ep, { model: 'llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 })).body.text();
  const ms = await metrics(ep);
  for (const name of [
    'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc',
    'vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total', 'vllm:prompt_tokens_total',
    'vllm:generation_tokens_total', 'vllm:request_success_total', 'vllm:time_to_first_token_seconds_count',
    'vllm:inter_token_latency_seconds_count', 'vllm:e2e_request_latency_seconds_count', 'vllm:request_queue_time_seconds_count',
  ]) {
    t.ok(ms.some((s) => s.name === name && s.labels.model_name === 'llama'), name);
  }
  t.equal(val(ms, 'vllm:generation_tokens_total'), 3);
  t.equal(val(ms, 'vllm:request_success_total', { finished_reason: 'length' }), 1);
  t.equal(val(ms, 'vllm:time_to_first_token_seconds_count'), 1);
  t.equal(val(ms, 'vllm:inter_token_latency_seconds_count'), 2);
  const lora = ms.find((s) => s.name === 'vllm:lora_requests_info')!;
  t.same(Object.keys(lora.labels).sort(), ['max_lora', 'running_lora_adapters', 'waiting_lora_adapters']);
  t.ok(Math.abs(lora.value - Date.now() / 1000) < 60, 'value is a timestamp');
  const cc = ms.find((s) => s.name === 'vllm:cache_config_info')!;
  t.equal(cc.labels.block_size, '16');
  t.equal(cc.labels.num_gpu_blocks, '25000');
});

t.test('a repeated long prefix cuts TTFT and raises prefix_cache_hits_total', async (t) => {
  const ep = await start({ timeScale: 5 });
  const doc = 'lorem ipsum dolor sit amet '.repeat(1200); // ~8k tokens
  const req = (q: string) => ({ model: 'm', messages: [{ role: 'system', content: doc }, { role: 'user', content: q }], max_tokens: 2 });
  // TTFT in the engine's own (virtual) time, from its histogram: what real time shows depends on the load
  const ttftSum = async () => val(await metrics(ep), 'vllm:time_to_first_token_seconds_sum')!;
  const s0 = await ttftSum();
  const cold = await streamUntilFirstToken(ep, req('first question'));
  await cold.rest();
  const before = await metrics(ep);
  const s1 = val(before, 'vllm:time_to_first_token_seconds_sum')!;
  const warm = await streamUntilFirstToken(ep, req('second question'));
  await warm.rest();
  const after = await metrics(ep);
  const s2 = val(after, 'vllm:time_to_first_token_seconds_sum')!;
  const coldMs = (s1 - s0) * 1000;
  const warmMs = (s2 - s1) * 1000;
  t.ok(warmMs < coldMs / 2, `TTFT cold ${coldMs.toFixed(1)} ms, warm ${warmMs.toFixed(1)} ms (engine time)`);
  const hits = val(after, 'vllm:prefix_cache_hits_total')! - val(before, 'vllm:prefix_cache_hits_total')!;
  t.ok(hits > 7500, `hit tokens ${hits}`);
  t.ok(val(after, 'vllm:prefix_cache_queries_total')! > val(before, 'vllm:prefix_cache_queries_total')!);
  const r = await (await post(ep, { ...req('third'), stream: false })).body.json() as { usage: { prompt_tokens_details: { cached_tokens: number } } };
  t.ok(r.usage.prompt_tokens_details.cached_tokens > 7500, 'usage reports cached tokens');
});

t.test('more requests than max_num_seqs wait; aborts free the capacity', async (t) => {
  const ep = await start({ maxNumSeqs: 2, timeScale: 1 });
  const ac = new AbortController();
  const reqs = [0, 1, 2, 3, 4].map((i) =>
    post(ep, { model: 'm', messages: [{ role: 'user', content: `q${i}` }], max_tokens: 5000, stream: true }, ac.signal).catch(() => undefined),
  );
  await waitFor('3 waiting', async () => {
    const ms = await metrics(ep);
    return val(ms, 'vllm:num_requests_waiting') === 3 && val(ms, 'vllm:num_requests_running') === 2;
  });
  t.pass('num_requests_running 2, num_requests_waiting 3');
  ac.abort();
  await Promise.all(reqs);
  const ms = await waitFor('all aborted', async () => {
    const ms = await metrics(ep);
    return val(ms, 'vllm:num_requests_running') === 0 && val(ms, 'vllm:num_requests_waiting') === 0 && ms;
  });
  t.equal(val(ms, 'vllm:kv_cache_usage_perc'), 0, 'blocks freed');
  t.equal(val(ms, 'vllm:request_success_total', { finished_reason: 'abort' }), 5);
});

t.test('KV usage rises under load; cached blocks are evicted LRU', async (t) => {
  const ep = await start({ kvBlocks: 120, timeScale: 1 });
  const ac = new AbortController();
  const big = 'a'.repeat(4 * 1000); // ~1000 tokens = 63 blocks
  const s = await streamUntilFirstToken(ep, { model: 'm', messages: [{ role: 'user', content: big }], max_tokens: 5000 }, ac.signal);
  void s.rest().catch(() => undefined);
  const usage = await waitFor('kv usage', async () => {
    const u = val(await metrics(ep), 'vllm:kv_cache_usage_perc')!;
    return u > 0.5 && u;
  });
  t.ok(usage > 0.5 && usage <= 1, `kv usage ${usage}`);
  ac.abort();
  await waitFor('freed', async () => val(await metrics(ep), 'vllm:kv_cache_usage_perc') === 0);

  // fill the cache with distinct prompts; the least recently used is evicted first
  const prompt = (i: number) => ({ model: 'm', messages: [{ role: 'user', content: `${i}`.repeat(4 * 500) }], max_tokens: 1 });
  const cached = async (i: number) =>
    ((await (await post(ep, prompt(i))).body.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } }).usage.prompt_tokens_details.cached_tokens;
  for (const i of [1, 2, 3, 4, 5, 6]) await cached(i); // 6 x ~32 blocks > 120 (after the big prompt's 63)
  const state = JSON.parse(await (await request(`http://${ep}/mock/state`, { dispatcher: agent })).body.text());
  t.ok(state.evictedBlocks > 0, `evicted ${state.evictedBlocks} blocks`);
  t.ok((await cached(6)) > 400, 'most recent prompt still cached');
  t.equal(await cached(1), 0, 'oldest prompt evicted');
});

t.test('LoRA residency shows in lora_requests_info', async (t) => {
  const ep = await start({ lora: ['a', 'b'], maxLoras: 1, timeScale: 1 });
  const ac = new AbortController();
  const sa = await streamUntilFirstToken(ep, { model: 'a', messages: [{ role: 'user', content: 'x' }], max_tokens: 5000 }, ac.signal);
  void sa.rest().catch(() => undefined);
  const pb = post(ep, { model: 'b', messages: [{ role: 'user', content: 'y' }], max_tokens: 5, stream: true }, ac.signal).catch(() => undefined);
  const info = await waitFor('b waiting for a slot', async () => {
    const s = (await metrics(ep)).find((x) => x.name === 'vllm:lora_requests_info')!;
    return s.labels.waiting_lora_adapters === 'b' && s;
  });
  t.equal(info.labels.running_lora_adapters, 'a');
  t.equal(info.labels.max_lora, '1');
  ac.abort();
  await pb;
  // now b can load
  const r = await post(ep, { model: 'b', messages: [{ role: 'user', content: 'y' }], max_tokens: 2 });
  t.equal(r.statusCode, 200);
  await r.body.text();
  const st = JSON.parse(await (await request(`http://${ep}/mock/state`, { dispatcher: agent })).body.text());
  t.same(st.loraResident, ['b'], 'a evicted for b');
});

t.test('a client that does not read: output is held up to a bound, then the request is cut', async (t) => {
  const { connect } = await import('node:net');
  const ep = await start({ timeScale: 2000, decodeMs: 1, stepOverheadMs: 0 });
  const [host, port] = ep.split(':');
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 120000, stream: true });
  const sock = connect(Number(port), host);
  sock.on('error', () => undefined);
  await new Promise<void>((r) => sock.on('connect', () => r()));
  sock.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: ${ep}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  sock.pause(); // never read
  t.teardown(() => sock.destroy());
  await waitFor('running', async () => JSON.parse(await (await request(`http://${ep}/mock/state`, { dispatcher: agent })).body.text()).running === 1);
  const rss0 = process.memoryUsage().rss;
  const st = await waitFor('cut off', async () => {
    const s = JSON.parse(await (await request(`http://${ep}/mock/state`, { dispatcher: agent })).body.text());
    return s.running === 0 && s;
  }, 20000);
  t.ok(st.generationTokensTotal < 120000, `stopped after ${st.generationTokensTotal} tokens`);
  t.ok(process.memoryUsage().rss - rss0 < 200 * 1024 * 1024, 'memory bounded');
});
