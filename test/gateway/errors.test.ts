// Every client-facing error status, with OpenAI's error body, from a real gateway process.
import tap from "tap";
const t = tap;
import { request } from 'undici';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { startGateway, gatewayConfig, freePort } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const gw = await startGateway(
  gatewayConfig([up.endpoint], { over: { limits: { max_body_bytes: '64kb', max_header_bytes: '8kb', first_byte_timeout: '300ms', response_timeout: '300ms' } } }),
);
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

interface ErrBody { error: { message: string; type: string; param: string | null; code: string } }

async function post(path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await request(`${gw.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: JSON.parse(text) as ErrBody };
}

function isOpenAIError(t: typeof tap, json: ErrBody, code: string) {
  t.type(json.error.message, 'string');
  t.type(json.error.type, 'string');
  t.ok('param' in json.error);
  t.equal(json.error.code, code);
}

t.test('400: invalid JSON, non-object, missing model, bad fields', async (t) => {
  for (const [body, code] of [
    ['{"model": "test-model", ', 'invalid_json'],
    ['', 'invalid_json'],
    ['[1,2]', 'invalid_body'],
    ['"just a string"', 'invalid_body'],
    ['{"messages":[]}', 'missing_model'],
    ['{"model": 7, "messages":[{"role":"user","content":"x"}]}', 'missing_model'],
    ['{"model":"test-model"}', 'invalid_field'],
    ['{"model":"test-model","messages":[{"role":"user","content":"x"}],"stream":"yes"}', 'invalid_field'],
    ['{"model":"test-model","messages":[{"role":"user","content":"x"}],"max_tokens":-1}', 'invalid_field'],
  ] as const) {
    const r = await post('/v1/chat/completions', body);
    t.equal(r.status, 400, `400 for ${body}`);
    isOpenAIError(t, r.json, code);
  }
  const r = await post('/v1/completions', '{"model":"test-model"}');
  t.equal(r.status, 400, 'completions without prompt');
  t.equal(r.json.error.param, 'prompt');
});

t.test('404: unknown model and unknown path', async (t) => {
  const r = await post('/v1/chat/completions', JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
  t.equal(r.status, 404);
  isOpenAIError(t, r.json, 'model_not_found');
  t.equal(r.json.error.param, 'model');
  const p = await request(`${gw.url}/v1/audio/speech`, { method: 'POST', body: '{}' });
  t.equal(p.statusCode, 404);
  isOpenAIError(t, (await p.body.json()) as ErrBody, 'not_found');
  const g = await request(`${gw.url}/v1/chat/completions`);
  t.equal(g.statusCode, 405, 'GET on a POST route');
  t.equal(g.headers.allow, 'POST, OPTIONS', 'the 405 says which methods the path takes');
  await g.body.text();
});

t.test('413: body over the limit, by Content-Length or while streaming', async (t) => {
  const big = Buffer.alloc(100 * 1024, 'a');
  const r = await post('/v1/chat/completions', big);
  t.equal(r.status, 413);
  isOpenAIError(t, r.json, 'request_too_large');
  // A client that lies small-then-large cannot happen with Content-Length; send chunked instead.
  const chunked = await new Promise<string>((resolve, reject) => {
    const url = new URL(gw.url);
    const sock = connect(Number(url.port), url.hostname);
    let got = '';
    sock.on('data', (d) => (got += d.toString()));
    sock.on('close', () => resolve(got));
    sock.on('error', () => undefined); // the gateway may close while we still write: EPIPE is expected
    sock.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const piece = Buffer.alloc(16 * 1024, 'b');
    let sent = 0;
    const pump = () => {
      if (sock.destroyed || sent > 400) return;
      sent++;
      sock.write(`${piece.length.toString(16)}\r\n`);
      sock.write(piece);
      sock.write('\r\n', () => setImmediate(pump));
    };
    pump();
    setTimeout(() => sock.destroy(), 10_000).unref();
  });
  t.match(chunked, /^HTTP\/1\.1 413/, 'answered 413 while the body was still arriving');
});

t.test('431: request headers over max_header_bytes', async (t) => {
  const res = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST', body: chatBody(), headers: { authorization: `Bearer ${'x'.repeat(12 * 1024)}` },
  }).catch((e: Error) => e);
  if (res instanceof Error) {
    t.fail(`connection failed instead of 431: ${res.message}`);
    return;
  }
  t.equal(res.statusCode, 431);
  await res.body.text();
  // A bearer token well over uWS's default 4 KB still passes.
  const ok = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST', body: chatBody(), headers: { authorization: `Bearer ${'x'.repeat(6 * 1024)}` },
  });
  t.equal(ok.statusCode, 200);
  await ok.body.text();
});

t.test('502/503/504 when upstreams fail, with no backend address in the body', async (t) => {
  const dead = await freePort();
  const gwDead = await startGateway(gatewayConfig([`127.0.0.1:${dead}`]));
  t.teardown(() => gwDead.stop());
  const r = await request(`${gwDead.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
  const text = await r.body.text();
  t.equal(r.statusCode, 502);
  isOpenAIError(t, JSON.parse(text) as ErrBody, 'upstream_unavailable');
  t.notMatch(text, String(dead), 'no backend port in the message');
  t.notMatch(text, /at .*\.js/, 'no stack trace');

  up.behaviour = (_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"overloaded"}');
  const before = up.received.length;
  const r503 = await post('/v1/chat/completions', chatBody());
  t.equal(r503.status, 503, 'with no other endpoint, the upstream 503 passes through');
  t.equal(r503.text, '{"error":"overloaded"}', 'as the upstream sent it');
  t.equal(up.received.length - before, 1, 'not sent twice to the same endpoint');

  up.behaviour = () => undefined; // never answers
  const r504 = await post('/v1/chat/completions', chatBody());
  t.equal(r504.status, 504);
  isOpenAIError(t, r504.json, 'upstream_timeout');
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
});

t.test('the gateway survives all of the above', async (t) => {
  const r = await post('/v1/chat/completions', chatBody());
  t.equal(r.status, 200);
  const m = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(m, /infergate_rejected_total\{reason="invalid"/);
});

t.test('415: a compressed request body is refused by name, not quoted back as broken JSON', async (t) => {
  const gz = gzipSync(chatBody());
  const r = await post('/v1/chat/completions', gz, { 'content-encoding': 'gzip' });
  t.equal(r.status, 415);
  isOpenAIError(t, r.json, 'unsupported_content_encoding');
  t.match(r.json.error.message, /"gzip"/);
  const ok = await post('/v1/chat/completions', chatBody(), { 'content-encoding': 'identity' });
  t.equal(ok.status, 200, 'identity is no encoding');
});
