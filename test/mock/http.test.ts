/**
 * The mock over HTTP: wire shapes (OpenAI/vLLM), SSE framing, errors, determinism, faults, the CLI.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { Agent, Client, fetch as ufetch, request } from 'undici';
import OpenAI from 'openai';
import { startMockServers, type MockOptions } from '../../src/mock/index.js';
import { freePorts } from '../e2e/support.js';

const agent = new Agent({ keepAliveTimeout: 1000, connections: 64 });
t.teardown(() => agent.close());

async function start(opts: Partial<MockOptions> & { count?: number } = {}) {
  const s = await startMockServers({ port: 0, model: 'm', timeScale: 20, ...opts });
  t.teardown(() => s.close());
  return s;
}

async function post(ep: string, path: string, body: unknown, signal?: AbortSignal) {
  const r = await request(`http://${ep}${path}`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    dispatcher: agent,
    signal,
  });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text, json: () => JSON.parse(text) };
}

async function get(ep: string, path: string, signal?: AbortSignal) {
  const r = await request(`http://${ep}${path}`, { dispatcher: agent, signal });
  return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: 'm',
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content },
  ],
  ...extra,
});

t.test('streaming chat: exact SSE framing, role chunk, finish_reason, usage chunk, [DONE]', async (t) => {
  const s = await start();
  const r = await post(s.endpoints[0], '/v1/chat/completions', chat('hi', { max_tokens: 7, stream: true, stream_options: { include_usage: true } }));
  t.equal(r.status, 200);
  t.match(r.headers['content-type'], /^text\/event-stream/);
  t.equal(r.headers['x-mock-endpoint'], s.endpoints[0]);
  t.ok(r.text.endsWith('data: [DONE]\n\n'));
  const events = r.text.split('\n\n');
  t.equal(events.pop(), '', 'every event ends with a blank line');
  for (const e of events) t.match(e, /^data: \S/, 'one data line per event');
  t.equal(events.pop(), 'data: [DONE]');
  const chunks = events.map((e) => JSON.parse(e.slice(6)));
  const ids = new Set(chunks.map((c) => c.id));
  t.equal(ids.size, 1, 'one id');
  t.match([...ids][0], /^chatcmpl-/);
  for (const c of chunks) {
    t.equal(c.object, 'chat.completion.chunk');
    t.equal(c.model, 'm');
    t.type(c.created, 'number');
  }
  t.same(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const content = chunks.slice(1, -1);
  t.equal(content.length, 7, 'one chunk per output token');
  content.forEach((c, i) => {
    t.type(c.choices[0].delta.content, 'string');
    t.equal(c.choices[0].finish_reason, i === 6 ? 'length' : null);
  });
  const usage = chunks.at(-1);
  t.same(usage.choices, []);
  t.equal(usage.usage.completion_tokens, 7);
  t.equal(usage.usage.prompt_tokens + 7, usage.usage.total_tokens);
  t.type(usage.usage.prompt_tokens_details.cached_tokens, 'number');
});

t.test('streaming completions and non-streaming shapes', async (t) => {
  const s = await start();
  const ep = s.endpoints[0];
  const r = await post(ep, '/v1/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 3, stream: true });
  const ev = r.text.split('\n\n').filter(Boolean);
  t.equal(ev.length, 4, '3 tokens + [DONE], no usage chunk unless asked');
  const c0 = JSON.parse(ev[0].slice(6));
  t.equal(c0.object, 'text_completion');
  t.type(c0.choices[0].text, 'string');
  t.equal(JSON.parse(ev[2].slice(6)).choices[0].finish_reason, 'length');

  const nc = await post(ep, '/v1/chat/completions', chat('hello', { max_completion_tokens: 5 }));
  t.equal(nc.status, 200);
  t.equal(nc.headers['x-mock-endpoint'], ep);
  const b = nc.json();
  t.equal(b.object, 'chat.completion');
  t.equal(b.choices[0].message.role, 'assistant');
  t.equal(b.choices[0].finish_reason, 'length');
  t.equal(b.usage.completion_tokens, 5);
  t.equal(b.choices[0].message.content.split(' ').length - 1, 5, 'five words');

  const ncomp = (await post(ep, '/v1/completions', { prompt: ['a', 'b'], max_tokens: 2 })).json();
  t.equal(ncomp.object, 'text_completion');
  t.equal(ncomp.model, 'm', 'model defaults to the served one');

  const natural = (await post(ep, '/v1/chat/completions', chat('no limit'))).json();
  t.equal(natural.choices[0].finish_reason, 'stop', 'without max_tokens the answer ends by itself');
  t.ok(natural.usage.completion_tokens >= 16);
});

t.test('the openai client reads the stream', async (t) => {
  const s = await start();
  const client = new OpenAI({ baseURL: `http://${s.endpoints[0]}/v1`, apiKey: 'x', fetch: ((u: string, i: object) => ufetch(u, { ...i, dispatcher: agent })) as never });
  const stream = await client.chat.completions.create({
    model: 'm',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 4,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined | null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) usage = c.usage;
  }
  t.equal(text.split(' ').length - 1, 4);
  t.equal(usage?.completion_tokens, 4);
  const models = await client.models.list();
  t.same(models.data.map((m) => m.id), ['m']);
});

t.test('output depends only on seed and request', async (t) => {
  const a = await start({ count: 2, seed: 7 });
  const b = await start({ seed: 8 });
  const req = chat('tell me a story', { max_tokens: 12 });
  const r1 = (await post(a.endpoints[0], '/v1/chat/completions', req)).json().choices[0].message.content;
  await post(a.endpoints[0], '/v1/chat/completions', chat('something else', { max_tokens: 30 }));
  const r2 = (await post(a.endpoints[0], '/v1/chat/completions', req)).json().choices[0].message.content;
  const r3 = (await post(a.endpoints[1], '/v1/chat/completions', req)).json().choices[0].message.content;
  const r4 = (await post(b.endpoints[0], '/v1/chat/completions', req)).json().choices[0].message.content;
  t.equal(r1, r2, 'same server, later request');
  t.equal(r1, r3, 'other server, same seed');
  t.not(r1, r4, 'other seed');
  const streamed = await post(a.endpoints[1], '/v1/chat/completions', { ...req, stream: true });
  const text = streamed.text
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '')
    .join('');
  t.equal(text, r1, 'streamed text equals the non-streamed text');
});

t.test('bad input gets vLLM-like errors', async (t) => {
  const s = await start({ maxModelLen: 100, lora: ['ad'] });
  const ep = s.endpoints[0];
  const cases: Array<[string, unknown, number, RegExp]> = [
    ['bad JSON', '{"model": ', 400, /JSON/],
    ['non-object', '[1,2]', 400, /object/],
    ['null', 'null', 400, /object/],
    ['unknown model', chat('x', { model: 'nope' }), 404, /does not exist/],
    ['no messages', { model: 'm' }, 400, /messages/],
    ['empty messages', { model: 'm', messages: [] }, 400, /messages/],
    ['prompt too long', chat('x'.repeat(500)), 400, /maximum context length is 100/],
    ['prompt + max_tokens too long', chat('x'.repeat(200), { max_tokens: 80 }), 400, /maximum context length/],
    ['max_tokens 0', chat('x', { max_tokens: 0 }), 400, /max_tokens/],
    ['max_tokens -3', chat('x', { max_tokens: -3 }), 400, /max_tokens/],
    ['max_tokens 1.5', chat('x', { max_tokens: 1.5 }), 400, /max_tokens/],
    ['max_tokens string', chat('x', { max_tokens: '5' }), 400, /max_tokens/],
    ['max_completion_tokens 0', chat('x', { max_completion_tokens: 0 }), 400, /max_completion_tokens/],
    ['stream not boolean', chat('x', { stream: 'yes' }), 400, /stream/],
    ['n = 2 (one sequence per request here)', chat('x', { n: 2 }), 400, /n = 1 only/],
  ];
  for (const [name, body, status, msg] of cases) {
    const r = await post(ep, '/v1/chat/completions', body);
    t.equal(r.status, status, name);
    const e = r.json().error;
    t.match(e.message, msg, name);
    t.equal(e.code, status, `${name}: code`);
    t.type(e.type, 'string');
    t.equal(r.headers['x-mock-endpoint'], ep);
  }
  const c = await post(ep, '/v1/completions', { model: 'm', prompt: 5 });
  t.equal(c.status, 400, 'completions need a prompt');
  const empty = await post(ep, '/v1/completions', { model: 'm', prompt: '' });
  t.equal(empty.status, 400, 'empty prompt');
  t.equal((await post(ep, '/v1/completions', { model: 'ad', prompt: 'ok', max_tokens: 1 })).status, 200, 'adapter is a model');
  t.equal((await post(ep, '/v1/chat/completions', chat('x', { n: 1, max_tokens: 1 }))).status, 200, 'n = 1 is served');
  t.equal((await get(ep, '/nope')).status, 404);
});

t.test('/v1/models, /health', async (t) => {
  const s = await start({ lora: ['ad1', 'ad2'], maxLoras: 2 });
  const ep = s.endpoints[0];
  const m = JSON.parse((await get(ep, '/v1/models')).text);
  t.equal(m.object, 'list');
  t.same(m.data.map((x: { id: string }) => x.id), ['m', 'ad1', 'ad2']);
  t.equal(m.data[0].parent, null);
  t.equal(m.data[1].parent, 'm');
  t.equal(m.data[0].owned_by, 'vllm');
  const h = await get(ep, '/health');
  t.equal(h.status, 200);
  t.equal(h.headers['x-mock-endpoint'], ep);
});

t.test('faults: 500, refuse, cut', async (t) => {
  const s500 = await start({ failRate: 1, failMode: '500' });
  const r = await post(s500.endpoints[0], '/v1/chat/completions', chat('x', { max_tokens: 2 }));
  t.equal(r.status, 500);
  t.equal(r.json().error.code, 500);

  const refuse = await start({ failRate: 1, failMode: 'refuse' });
  await t.rejects(post(refuse.endpoints[0], '/v1/chat/completions', chat('x', { max_tokens: 2 })), 'socket closed before any byte');

  const cut = await start({ failRate: 1, failMode: 'cut' });
  const res = await request(`http://${cut.endpoints[0]}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(chat('x', { max_tokens: 20, stream: true })),
    dispatcher: agent,
  });
  t.equal(res.statusCode, 200);
  let got = '';
  await t.rejects(
    (async () => {
      for await (const c of res.body) got += c.toString();
    })(),
    'the stream ends abruptly',
  );
  t.match(got, /data: \{/, 'some events came');
  t.notMatch(got, /\[DONE\]/, 'no [DONE]');
  await t.resolveMatch(
    (async () => JSON.parse((await get(cut.endpoints[0], '/mock/state')).text).running)(),
    0,
    'the cut request left the engine',
  );

  // switch faults off at run time
  const set = await post(s500.endpoints[0], '/mock/faults', { fail_rate: 0 });
  t.equal(set.status, 200);
  t.equal((await post(s500.endpoints[0], '/v1/chat/completions', chat('x', { max_tokens: 2 }))).status, 200);
  t.equal((await post(s500.endpoints[0], '/mock/faults', { metrics: 'sideways' })).status, 400);
  const mixed = await start({ failRate: 0.5, failMode: 'mixed', seed: 3 });
  let ok = 0;
  let bad = 0;
  for (let i = 0; i < 30; i++) {
    try {
      const x = await post(mixed.endpoints[0], '/v1/completions', { prompt: 'p' + i, max_tokens: 4, stream: true });
      if (x.status === 200 && x.text.endsWith('data: [DONE]\n\n')) ok++;
      else bad++;
    } catch {
      bad++;
    }
  }
  t.ok(ok > 3 && bad > 3, `mixed: ${ok} ok, ${bad} failed`);
});

t.test('faults: /metrics hangs or errors while inference goes on', async (t) => {
  const s = await start();
  const ep = s.endpoints[0];
  t.equal((await get(ep, '/metrics')).status, 200);
  t.equal((await post(ep, '/mock/faults', { metrics: 'hang' })).status, 200);
  const hung = get(ep, '/metrics', AbortSignal.timeout(300));
  await t.rejects(hung, 'scrape never answers');
  t.equal((await post(ep, '/v1/chat/completions', chat('x', { max_tokens: 3 }))).status, 200, 'inference still works');
  await post(ep, '/mock/faults', { metrics: 'error' });
  t.equal((await get(ep, '/metrics')).status, 500);
  await post(ep, '/mock/faults', { metrics: 'ok' });
  t.equal((await get(ep, '/metrics')).status, 200);

  const later = await start({ metricsHangAfterS: 0.2 });
  t.equal((await get(later.endpoints[0], '/metrics')).status, 200, 'answers at first');
  const deadline = Date.now() + 5000;
  let hangs = false;
  while (!hangs && Date.now() < deadline) {
    try {
      await get(later.endpoints[0], '/metrics', AbortSignal.timeout(150));
    } catch {
      hangs = true;
    }
  }
  t.ok(hangs, '--metrics-hang-after: hangs later');
});

const tsLoader = '@isaacs/ts-node-temp-fork-for-pr-2009/esm';
function runCli(args: string[]) {
  const src = pathToFileURL(new URL('../../src/mock/index.ts', import.meta.url).pathname).href;
  return spawn(
    process.execPath,
    ['--no-warnings', '--loader', tsLoader, '--input-type=module', '-e', `const { mockMain } = await import(${JSON.stringify(src)}); process.exitCode = await mockMain(process.argv.slice(1));`, "--", ...args],
    { env: { ...process.env, TS_NODE_TRANSPILE_ONLY: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

t.test('CLI: mockMain prints one line per server and exits 0 on SIGTERM; bad flags exit 2', async (t) => {
  const base = await freePorts(2); // below the ephemeral range, checked free
  const p = runCli(['--port', String(base), '--count', '2', '--model', 'cli-model', '--time-scale', '50']);
  let out = '';
  p.stdout.on('data', (d) => (out += d));
  let err = '';
  p.stderr.on('data', (d) => (err += d));
  const exit = new Promise<number | null>((r) => p.on('exit', (c) => r(c)));
  const deadline = Date.now() + 60_000;
  while (!out.includes(`:${base + 1}`) && Date.now() < deadline && p.exitCode === null) await new Promise((r) => setTimeout(r, 50));
  t.match(out, `mock listening on http://127.0.0.1:${base}\n`, err);
  t.match(out, `mock listening on http://127.0.0.1:${base + 1}\n`);
  const r = await post(`127.0.0.1:${base + 1}`, '/v1/chat/completions', { model: 'cli-model', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
  t.equal(r.status, 200);
  t.equal(r.headers['x-mock-endpoint'], `127.0.0.1:${base + 1}`);
  p.kill('SIGTERM');
  t.equal(await exit, 0, 'clean exit');

  const bad = runCli(['--port', '1', '--model', 'x', '--fail-mode', 'sometimes']);
  let berr = '';
  bad.stderr.on('data', (d) => (berr += d));
  t.equal(await new Promise((r) => bad.on('exit', r)), 2);
  t.match(berr, /fail-mode/);
});

t.test('HEAD on GET routes and unknown paths: the status without a body, and the connection stays usable', async (t) => {
  const s = await start();
  const client = new Client(`http://${s.endpoints[0]}`); // one connection: every request below reuses it
  t.teardown(() => client.close());
  for (const [path, status] of [['/health', 200], ['/metrics', 200], ['/v1/models', 200], ['/nope', 404]] as const) {
    const h = await client.request({ method: 'HEAD', path });
    t.equal(h.statusCode, status, `HEAD ${path}: ${status}`);
    t.equal(await h.body.text(), '', `HEAD ${path}: no body`);
    const g = await client.request({ method: 'GET', path: '/health' });
    t.equal(g.statusCode, 200, `after HEAD ${path}, the next answer on the connection reads correctly`);
    await g.body.text();
  }
});
