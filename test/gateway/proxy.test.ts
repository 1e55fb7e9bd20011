// The streaming proxy path with a real gateway process and a scriptable upstream.
import t from 'tap';
import { request } from 'undici';
import { connect } from 'node:net';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream, sseBody, streamSse, CHAT_JSON, chatBody } from '../helpers/upstream.js';
import { uwsBuild } from '../helpers/tools.js';

const up = await startUpstream((_req, res) => res.end());
// the pool's key comes from an environment variable (a key is never written in the config file)
const gw = await startGateway(gatewayConfig([up.endpoint], { pool: { api_key_env: 'POOL_KEY' } }), { POOL_KEY: 'upstream-secret' });
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

// (the client asks for the usage chunk: one it did not ask for is taken out, as the gateway asks every
// stream for its usage to count tokens: test/observability/access-log.test.ts)
t.test('SSE answer reaches the client byte for byte, usage chunk included', async (t) => {
  const body = sseBody(50);
  up.behaviour = (_req, res) => streamSse(res, body);
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true, stream_options: { include_usage: true } }), headers: { 'content-type': 'application/json' } });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/event-stream/);
  t.equal(res.headers['x-upstream'], 'yes', 'upstream headers pass through');
  t.equal(res.headers['x-infergate-endpoint'], up.endpoint, 'debug header names the pod');
  const text = await res.body.text();
  t.equal(text, body, 'identical bytes');
  const usage = text.split('\n\n').find((e) => e.includes('"usage"'));
  t.ok(usage, 'usage chunk present');
  t.same(JSON.parse(usage!.slice(6)).choices, [], 'usage chunk has choices: []');
});

t.test('non-streaming JSON answer passes through with its length', async (t) => {
  up.behaviour = (_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAT_JSON) }).end(CHAT_JSON);
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
  t.equal(res.statusCode, 200);
  t.equal(res.headers['content-length'], String(Buffer.byteLength(CHAT_JSON)));
  t.equal(await res.body.text(), CHAT_JSON);
});

t.test('upstream status and error bodies pass through (4xx from the model server)', async (t) => {
  const errBody = JSON.stringify({ object: 'error', message: 'bad max_tokens', type: 'BadRequestError', code: 400 });
  up.behaviour = (_req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(errBody);
  const res = await request(`${gw.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'test-model', prompt: 'x' }) });
  t.equal(res.statusCode, 400);
  t.equal(await res.body.text(), errBody);
  t.equal(up.received.at(-1)!.url, '/v1/completions', 'completions go to /v1/completions');
});

t.test('request headers: credentials replaced, request id added or kept, traceparent passed, body bytes unchanged', async (t) => {
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const raw = `{"model":"test-model",  "messages":[{"role":"user","content":"spaces   kept"}]}`;
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const res = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST', body: raw,
    headers: { authorization: 'Bearer client-token', traceparent: tp, 'x-request-id': 'req-123', connection: 'keep-alive', 'x-custom': 'v' },
  });
  await res.body.text();
  const rec = up.received.at(-1)!;
  t.equal(rec.headers.authorization, 'Bearer upstream-secret', 'pool api_key sent, client token not');
  t.equal(rec.headers.traceparent?.slice(0, 36), tp.slice(0, 36), 'the client\'s trace goes on upstream');
  t.not(rec.headers.traceparent, tp, 'under the gateway\'s own span');
  t.equal(rec.headers['x-request-id'], 'req-123');
  t.equal(rec.headers['x-custom'], 'v');
  t.equal(rec.body, raw, 'original bytes forwarded');
  t.equal(res.headers['x-request-id'], 'req-123', 'client sees its request id');

  const res2 = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: raw });
  await res2.body.text();
  t.match(up.received.at(-1)!.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a request id is generated');
  t.equal(res2.headers['x-request-id'], up.received.at(-1)!.headers['x-request-id']);

  // A header sent twice reaches the model server as one list, not only its last value.
  const res3 = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST', body: raw, headers: ['x-list', 'a=1', 'x-list', 'b=2', 'cookie', 'x=1', 'cookie', 'y=2', 'constructor', 'c'],
  });
  await res3.body.text();
  t.equal(up.received.at(-1)!.headers['x-list'], 'a=1, b=2', 'a repeated header is joined with ", "');
  t.equal(up.received.at(-1)!.headers.cookie, 'x=1; y=2', 'cookies with "; "');
  t.equal(up.received.at(-1)!.headers.constructor, 'c', 'a header named like an Object property is its own value');
});

t.test('headers named in the client\'s Connection header are not forwarded', async (t) => {
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const { request: httpRequest } = await import('node:http');
  const url = new URL(`${gw.url}/v1/chat/completions`);
  await new Promise<void>((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { connection: 'keep-alive, X-Hop', 'x-hop': 'h', 'x-end': 'e' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve());
      },
    );
    req.on('error', reject);
    req.end(chatBody());
  });
  const rec = up.received.at(-1)!;
  t.notOk('x-hop' in rec.headers, 'x-hop dropped');
  t.equal(rec.headers['x-end'], 'e', 'other headers kept');
});

t.test('headers named in the model server\'s Connection header are not passed back', async (t) => {
  up.behaviour = (_req, res) => {
    // node writes its own Connection header; the raw head below sends ours as a model server might
    res.socket!.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(CHAT_JSON)}\r\nconnection: keep-alive, X-Secret\r\nx-secret: 1\r\nx-kept: 2\r\n\r\n${CHAT_JSON}`);
    res.socket!.end();
  };
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
  t.equal(await res.body.text(), CHAT_JSON, 'the answer passes');
  t.equal(res.statusCode, 200);
  t.notOk('x-secret' in res.headers, 'x-secret dropped');
  t.equal(res.headers['x-kept'], '2', 'other headers kept');
});

t.test('an alias is rewritten to its target model', async (t) => {
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'alias', messages: [{ role: 'user', content: 'x' }] }) });
  await res.body.text();
  t.equal(res.statusCode, 200);
  t.equal(JSON.parse(up.received.at(-1)!.body).model, 'test-model');
});

t.test('status lines carry the standard reason phrase; no uWebSockets header, not even the model server\'s', async (t) => {
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json', uwebsockets: '20' }).end(CHAT_JSON);
  const { request: httpRequest } = await import('node:http');
  const url = new URL(`${gw.url}/v1/chat/completions`);
  const got = await new Promise<{ msg: string; raw: string[] }>((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST' }, (res) => {
      res.resume();
      res.on('end', () => resolve({ msg: res.statusMessage ?? '', raw: res.rawHeaders }));
    });
    req.on('error', reject);
    req.end(chatBody());
  });
  t.equal(got.msg, 'OK');
  t.equal(got.raw.filter((h) => h.toLowerCase() === 'uwebsockets').length, 0);
});

t.test('GET /v1/models lists models and aliases in OpenAI shape', async (t) => {
  const res = await request(`${gw.url}/v1/models`);
  t.equal(res.statusCode, 200);
  const list = (await res.body.json()) as { object: string; data: Array<{ id: string; object: string }> };
  t.equal(list.object, 'list');
  t.same(list.data.map((m) => m.id).sort(), ['alias', 'test-model']);
  t.ok(list.data.every((m) => m.object === 'model'));
});

t.test('admin: healthz, readyz, metrics, debug/pools', async (t) => {
  t.equal((await request(`${gw.adminUrl}/healthz`)).statusCode, 200);
  // this test upstream answers /metrics with 404: the gateway cannot see it, so it is not ready
  const ready = await request(`${gw.adminUrl}/readyz`);
  t.equal(ready.statusCode, 503, 'not ready: no endpoint with readable metrics');
  t.match(await ready.body.json(), { status: 'not ready', models_not_ready: [{ missing: [{ pool: 'p', endpoints: [{ endpoint: up.endpoint, why: 'metrics never scraped' }] }] }] });
  const m = await request(`${gw.adminUrl}/metrics`);
  const text = await m.body.text();
  t.match(text, /infergate_requests_total\{[^}]*code="200"[^}]*\} \d+/);
  t.match(text, /^process_cpu_seconds_total /m, 'Node\'s process metrics under their standard names');
  t.match(text, /^nodejs_eventloop_lag_seconds /m);
  t.notMatch(text, /infergate_process_|infergate_nodejs_/, 'not prefixed');
  const d = await request(`${gw.adminUrl}/debug/pools`);
  t.equal(d.statusCode, 200);
  t.match(await d.body.text(), up.endpoint);
});

t.test('HEAD on every GET route (and on unknown paths): the status, no body, the connection still usable', async (t) => {
  // Raw sockets: a HEAD answer that carried a body would be misread as the start of the next answer.
  const headThenGet = async (base: string, path: string, next: string) => {
    const url = new URL(base);
    const sock = connect(Number(url.port), url.hostname);
    let data = '';
    sock.on('data', (d: Buffer) => (data += d.toString()));
    sock.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n\r\nGET ${next} HTTP/1.1\r\nHost: x\r\n\r\n`);
    try {
      return await until(() => {
        const first = data.indexOf('\r\n\r\n');
        const second = data.indexOf('\r\n\r\n', first + 4);
        const len = /content-length: (\d+)/i.exec(data.slice(first + 4, second));
        return second > 0 && len && data.length >= second + 4 + Number(len[1])
          ? { head: data.slice(0, first), rest: data.slice(first + 4) }
          : undefined;
      }, 5000, `answers to HEAD ${path} and GET ${next}`);
    } finally {
      sock.destroy();
    }
  };
  const cases: Array<[string, string, number, string]> = [
    [gw.adminUrl, '/healthz', 200, '/healthz'],
    [gw.adminUrl, '/readyz', 503, '/healthz'],
    [gw.adminUrl, '/metrics', 200, '/healthz'],
    [gw.adminUrl, '/debug/pools', 200, '/healthz'],
    [gw.adminUrl, '/debug/state', 200, '/healthz'],
    [gw.adminUrl, '/debug/decisions?n=1', 200, '/healthz'],
    [gw.adminUrl, '/debug/decisions?n=x', 400, '/healthz'],
    [gw.adminUrl, '/', 200, '/healthz'],
    [gw.adminUrl, '/nope', 404, '/healthz'],
    [gw.url, '/v1/models', 200, '/v1/models'],
    [gw.url, '/v1/chat/completions', 405, '/v1/models'],
    [gw.url, '/nope', 404, '/v1/models'],
  ];
  // the GET body's Content-Length on 20.57 (20.30 sends none: README, "HTTP surface")
  const withLength = (await uwsBuild()) === '20.57';
  for (const [base, path, status, next] of cases) {
    const r = await headThenGet(base, path, next);
    t.match(r.head, new RegExp(`^HTTP/1\\.1 ${status} `), `HEAD ${path}: ${status}`);
    t.match(r.rest, /^HTTP\/1\.1 200 /, `HEAD ${path}: no body, the next answer follows at once`);
    if (withLength) t.ok(Number(/content-length: (\d+)/i.exec(r.head)?.[1]) > 0, `HEAD ${path}: the GET body's Content-Length`);
  }
});
