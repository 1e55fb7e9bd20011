// One access line per client request, whatever its end: a real gateway (JWT on, a trusted proxy, small
// limits) in front of a real mock vLLM server, one request per status class, each line found by the
// request id the client sent and checked for the fields README.md's "Access log" table promises. Also: the
// W3C traceparent reaches the model server with the client's trace id and the gateway's span id (the mock
// reports what it received), a malformed one starts a new trace, and infergate_tokens_total adds up the
// usage the clients saw.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { parse } from 'yaml';
import { startGateway, gatewayConfig, runCli, ROOT, freePort } from '../helpers/process.js';
import { startMocks, scrape, metric, until } from '../e2e/support.js';
import { startUpstream } from '../helpers/upstream.js';

async function mint(sub: string, models: string): Promise<string> {
  const p = runCli(['token', '--sub', sub, '--models', models, '--ttl', '10m']);
  t.equal(await p.exited(20_000), 0, p.stderr());
  return p.stdout().trim();
}

const demoAuth = (parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as { auth: { jwt: Record<string, unknown> } }).auth;
const alice = await mint('alice', '*');
const dave = await mint('dave', 'some-other-model');
const lim = await mint('lim', '*');
demoAuth.jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');
const mock = await startMocks(1, ['--model', 'test-model', '--time-scale', '20', '--seed', '3']);
t.teardown(() => mock.kill());
const deadPort = await freePort();
// a model server that takes each request and resets the connection before any answer
const resetting = await startUpstream((_req, res) => res.socket!.destroy());
t.teardown(() => resetting.close());
const base = gatewayConfig(mock.endpoints, {
  pool: { policy: 'scored' },
  over: {
    auth: demoAuth,
    logging: { level: 'info', access_log: true },
    trusted_proxies: ['127.0.0.1'],
    limits: { max_body_bytes: '4kb', max_header_bytes: '8kb', retries: 0, max_connections_per_client: 1 },
    tenants: { default: { requests_per_minute: 1000 }, overrides: { lim: { requests_per_minute: 1 } } },
  },
});
const config = {
  ...base,
  models: [...base.models, { name: 'dead-model', pool: 'dead' }, { name: 'reset-model', pool: 'reset' }],
  pools: {
    ...base.pools,
    dead: { endpoints: [`127.0.0.1:${deadPort}`], policy: 'round_robin', metrics: { interval: '100ms', stale_after: '1s' } },
    reset: { endpoints: [resetting.endpoint], policy: 'round_robin' },
  },
};
const gw = await startGateway(config);
t.teardown(() => gw.stop());

type Line = Record<string, unknown>;

function lines(): Line[] {
  const out: Line[] = [];
  for (const l of gw.proc.stdout().split('\n')) {
    if (!l.startsWith('{')) continue;
    const o = JSON.parse(l) as Line;
    if (o.msg === 'request') out.push(o);
  }
  return out;
}

/** The access line of the request sent with this x-request-id (waits for it: it is written at the end). */
async function lineOf(id: string): Promise<Line> {
  return (await until(() => lines().find((l) => l.req_id === id), 10_000, `the access line of ${id}`))!;
}

let n = 0;
interface Sent {
  id: string;
  status: number;
  text: string;
  headers: Headers;
}

async function send(path: string, init: { method?: string; token?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Sent> {
  const id = `req-${++n}-${Date.now()}`;
  const headers: Record<string, string> = { 'x-request-id': id, 'x-forwarded-for': '203.0.113.7', ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${gw.url}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers,
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
    signal: AbortSignal.timeout(20_000),
  });
  return { id, status: r.status, text: await r.text(), headers: r.headers };
}

// a prompt of several prefix blocks (64 characters each), so a pick has a prefix-match ratio to log
const PROMPT = 'You answer questions about the weather in a few words, politely and without any detail. Say hello.';
const chatBody = (extra: Record<string, unknown> = {}) => ({ model: 'test-model', messages: [{ role: 'user', content: PROMPT }], max_tokens: 5, ...extra });

/** Fields every line has, whoever answered. */
function common(t: Test, l: Line, s: Sent, method: string, path: string): void {
  t.equal(l.status, s.status, 'status as the client saw it');
  t.equal(l.method, method);
  t.equal(l.path, path);
  t.equal(l.client, '127.0.0.1', 'the peer');
  t.equal(l.xff, '203.0.113.7', 'x-forwarded-for from a trusted proxy');
  t.type(l.duration_ms, 'number');
  t.equal(typeof l.trace_id === 'string' || l.trace_id === undefined, true);
}

t.test('200 JSON: routing, tokens, trace ids', async (t) => {
  const s = await send('/v1/chat/completions', { token: alice, body: chatBody() });
  t.equal(s.status, 200, s.text);
  const usage = (JSON.parse(s.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
  const l = await lineOf(s.id);
  common(t, l, s, 'POST', '/v1/chat/completions');
  t.match(l, { tenant: 'alice', model: 'test-model', pool: 'p', endpoint: mock.endpoints[0], policy: 'scored', attempts: 1, retries: 0 });
  t.equal(l.prompt_tokens, usage.prompt_tokens, 'prompt tokens from usage');
  t.equal(l.completion_tokens, usage.completion_tokens, 'completion tokens from usage');
  t.type(l.ttft_ms, 'number');
  t.match(l.trace_id, /^[0-9a-f]{32}$/);
  t.match(l.span_id, /^[0-9a-f]{16}$/);
  t.type(l.score, 'number', 'the winner\'s score (picks are explained: admin.decisions > 0)');
  t.type(l.prefix_match, 'number', 'the share of the prompt\'s prefix blocks the winner held');
  t.notOk('code' in l, 'no error code on a success');
});

t.test('200 stream, an alias: target and tokens counted though the client asked for no usage', async (t) => {
  const s = await send('/v1/chat/completions', { token: alice, body: chatBody({ model: 'alias', stream: true }) });
  t.equal(s.status, 200);
  t.match(s.text, /data: \[DONE\]/);
  t.notMatch(s.text, /"usage"/, 'the client sees no usage chunk it did not ask for');
  const l = await lineOf(s.id);
  common(t, l, s, 'POST', '/v1/chat/completions');
  t.match(l, { model: 'alias', target: 'test-model', pool: 'p' });
  t.type(l.prompt_tokens, 'number', 'usage read from the stream the gateway asked for');
  t.ok((l.completion_tokens as number) > 0);
});

t.test('refusals and errors each have their line, code and reason', async (t) => {
  const cases: Array<{ what: string; path: string; init: Parameters<typeof send>[1]; status: number; code: string; reason?: string; method: string }> = [
    { what: '400 bad JSON', path: '/v1/chat/completions', init: { token: alice, body: '{"model":' }, status: 400, code: 'invalid_json', method: 'POST' },
    { what: '401 no token', path: '/v1/chat/completions', init: { body: chatBody() }, status: 401, code: 'missing_token', reason: 'unauthorized', method: 'POST' },
    { what: '403 model not allowed', path: '/v1/chat/completions', init: { token: dave, body: chatBody() }, status: 403, code: 'model_not_allowed', reason: 'forbidden', method: 'POST' },
    { what: '404 unknown model', path: '/v1/chat/completions', init: { token: alice, body: chatBody({ model: 'nope' }) }, status: 404, code: 'model_not_found', method: 'POST' },
    { what: '404 unknown path', path: '/v1/nothing-here', init: { token: alice }, status: 404, code: 'not_found', method: 'GET' },
    { what: '405 GET on a POST route', path: '/v1/chat/completions', init: { token: alice }, status: 405, code: 'method_not_allowed', method: 'GET' },
    { what: '413 body too large', path: '/v1/chat/completions', init: { token: alice, body: chatBody({ user: 'x'.repeat(6000) }) }, status: 413, code: 'request_too_large', method: 'POST' },
    { what: '431 on a POST route', path: '/v1/chat/completions', init: { token: alice, body: chatBody(), headers: { 'x-big': 'y'.repeat(9000) } }, status: 431, code: 'headers_too_large', method: 'POST' },
    { what: '431 on a GET route', path: '/v1/models', init: { token: alice, headers: { 'x-big': 'y'.repeat(9000) } }, status: 431, code: 'headers_too_large', method: 'GET' },
    { what: '401 on GET /v1/models', path: '/v1/models', init: {}, status: 401, code: 'missing_token', reason: 'unauthorized', method: 'GET' },
  ];
  for (const c of cases) {
    const s = await send(c.path, c.init);
    t.equal(s.status, c.status, `${c.what}: ${s.text.slice(0, 200)}`);
    const l = await lineOf(s.id);
    common(t, l, s, c.method, c.path);
    t.equal(l.code, c.code, `${c.what}: code`);
    if (c.reason) t.equal(l.reject_reason, c.reason, `${c.what}: reject reason`);
  }
  const ok = await send('/v1/models', { token: alice });
  t.equal(ok.status, 200);
  common(t, await lineOf(ok.id), ok, 'GET', '/v1/models');
});

t.test('429: a tenant over its requests per minute', async (t) => {
  const first = await send('/v1/chat/completions', { token: lim, body: chatBody() });
  t.equal(first.status, 200);
  const s = await send('/v1/chat/completions', { token: lim, body: chatBody() });
  t.equal(s.status, 429);
  const l = await lineOf(s.id);
  common(t, l, s, 'POST', '/v1/chat/completions');
  t.match(l, { tenant: 'lim', code: 'rate_limit_exceeded', reject_reason: 'rate_limited', pool: 'p' });
});

t.test('502/503: a pool whose only endpoint is down', async (t) => {
  const s = await send('/v1/chat/completions', { token: alice, body: chatBody({ model: 'dead-model' }) });
  t.ok(s.status === 502 || s.status === 503, `status ${s.status}`);
  const l = await lineOf(s.id);
  common(t, l, s, 'POST', '/v1/chat/completions');
  t.match(l, { pool: 'dead', code: /^(upstream_unavailable|no_endpoint)$/ });
});

t.test('502: a model server that resets the connection; the line says why the try failed', async (t) => {
  const s = await send('/v1/chat/completions', { token: alice, body: chatBody({ model: 'reset-model' }) });
  t.equal(s.status, 502);
  const l = await lineOf(s.id);
  common(t, l, s, 'POST', '/v1/chat/completions');
  t.match(l, { pool: 'reset', code: 'upstream_unavailable', attempts: 1, upstream_error: /^(UND_ERR_SOCKET|ECONNRESET)$/ });
  const ok = await send('/v1/chat/completions', { token: alice, body: chatBody() });
  t.equal(ok.status, 200);
  t.equal((await lineOf(ok.id)).upstream_error, undefined, 'none on a request whose tries did not fail');
});

t.test('framing cut: no answer, still a line', async (t) => {
  const id = `cut-${Date.now()}`;
  const port = Number(new URL(gw.url).port);
  await new Promise<void>((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => {
      sock.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nx-request-id: ${id}\r\nTransfer-Encoding: gzip\r\n\r\n`);
    });
    sock.on('error', reject);
    sock.on('close', () => resolve());
    sock.resume();
  });
  const l = await lineOf(id);
  t.match(l, { status: 400, code: 'invalid_framing', closed_by: 'gateway', method: 'GET', path: '/v1/models' });
});

t.test('503 too_many_connections: refused by the front before any route, still a line', async (t) => {
  // one request in progress from this address (its body not finished), then another
  const port = Number(new URL(gw.url).port);
  const held = connect(port, '127.0.0.1');
  held.on('error', () => undefined);
  held.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\nx-request-id: held-${Date.now()}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":`);
  await until(async () => (await fetch(`${gw.adminUrl}/metrics`).then((r) => r.text())).includes('infergate_open_connections 1'), 10_000, 'the held request counted');
  const s = await send('/v1/models', { token: alice });
  held.destroy();
  t.equal(s.status, 503);
  const l = await lineOf(s.id);
  common(t, l, s, 'GET', '/v1/models');
  t.match(l, { code: 'too_many_connections', reject_reason: 'too_many_connections' });
  await until(() => lines().some((x) => String(x.req_id).startsWith('held-') && x.status === 499), 10_000, 'the held request\'s own line (499)');
});

interface Seen {
  traceparent?: string;
  tracestate?: string;
  x_request_id?: string;
}
async function seenByMock(id: string): Promise<Seen> {
  const seen = await until(async () => {
    const r = await fetch(`http://${mock.endpoints[0]}/mock/requests`);
    return ((await r.json()) as { requests: Seen[] }).requests.find((q) => q.x_request_id === id);
  }, 10_000, `the mock's record of ${id}`);
  return seen!;
}

t.test('traceparent: the client\'s trace continues to the model server under the gateway\'s span', async (t) => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const s = await send('/v1/chat/completions', {
    token: alice, body: chatBody(),
    headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc' },
  });
  t.equal(s.status, 200);
  const seen = await seenByMock(s.id);
  const l = await lineOf(s.id);
  t.equal(l.trace_id, traceId, 'logged trace id = the client\'s');
  t.equal(seen.traceparent, `00-${traceId}-${l.span_id as string}-01`, 'the mock got the trace id, the gateway\'s span and the sampled flag');
  t.not(l.span_id, '00f067aa0ba902b7', 'a span of its own');
  t.equal(seen.tracestate, 'vendor=abc', 'tracestate passed on as it is');
});

t.test('a malformed traceparent starts a new trace; junk never reaches the model server', async (t) => {
  for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01', 'junk\u00ff']) {
    const s = await send('/v1/chat/completions', { token: alice, body: chatBody(), headers: { traceparent: bad, tracestate: 'vendor=abc' } });
    t.equal(s.status, 200);
    const seen = await seenByMock(s.id);
    const l = await lineOf(s.id);
    t.match(l.trace_id, /^[0-9a-f]{32}$/, `${bad}: a new trace`);
    t.equal(seen.traceparent, `00-${l.trace_id as string}-${l.span_id as string}-00`, `${bad}: the new trace goes upstream, not sampled`);
    t.equal(seen.tracestate, undefined, `${bad}: its tracestate is dropped with it`);
  }
  const none = await send('/v1/chat/completions', { token: alice, body: chatBody() });
  const seen = await seenByMock(none.id);
  t.match(seen.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/, 'no traceparent: one is started');
});

t.test('infergate_tokens_total equals the usage the clients saw', async (t) => {
  const before = await scrape(gw.adminUrl);
  const count = (m: typeof before, kind: string) => metric(m, 'infergate_tokens_total', { model: 'test-model', pool: 'p', kind });
  const json = await send('/v1/chat/completions', { token: alice, body: chatBody({ max_tokens: 7 }) });
  const u1 = (JSON.parse(json.text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
  const stream = await send('/v1/chat/completions', { token: alice, body: chatBody({ max_tokens: 9, stream: true, stream_options: { include_usage: true } }) });
  const chunk = stream.text.split('\n\n').map((e) => e.replace(/^data: /, '')).filter((e) => e.startsWith('{') && e.includes('"usage"')).map((e) => JSON.parse(e) as { usage?: { prompt_tokens: number; completion_tokens: number } }).find((c) => c.usage);
  t.ok(chunk?.usage, 'the client asked for and got the usage chunk');
  await lineOf(stream.id); // the metrics are counted with the line
  const after = await scrape(gw.adminUrl);
  t.equal(count(after, 'prompt') - count(before, 'prompt'), u1.prompt_tokens + chunk!.usage!.prompt_tokens, 'prompt tokens');
  t.equal(count(after, 'completion') - count(before, 'completion'), u1.completion_tokens + chunk!.usage!.completion_tokens, 'completion tokens');
});
