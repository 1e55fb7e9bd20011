// CORS (the `cors` section) as a browser meets it, spoken by undici so every header can be read: the
// gateway answers preflights itself (no token needed: browsers send none), actual answers (streams and
// errors included) carry Access-Control-Allow-Origin for allowed origins only, and tokens are still
// required on actual requests. Real gateways (auth on) and mock servers.
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig, type RunningGateway } from '../helpers/process.js';
import { demoAuth, MODEL, startApi } from './support.js';

const APP = 'http://app.example:3000';
const EVIL = 'https://evil.example';
const api = await startApi({ cors: { origins: [APP, 'https://other.example'], max_age: '2m' } });
let star: RunningGateway | undefined;
t.teardown(async () => {
  await star?.stop();
  await api.stop();
});
const { gw, token } = api;

async function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  const r = await request(url, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body });
  const text = await r.body.text();
  return { status: r.statusCode, h: r.headers, text };
}

const preflight = (base: string, path: string, origin: string, headers: Record<string, string> = {}) =>
  call(`${base}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type', ...headers },
  });

const chatBody = (stream: boolean) => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream });

t.test('a preflight from an allowed origin: 204 with the path\'s methods, the headers asked for, max age; no token needed', async (t) => {
  const r = await preflight(gw.url, '/v1/chat/completions', APP);
  t.equal(r.status, 204);
  t.equal(r.h['access-control-allow-origin'], APP);
  t.equal(r.h['access-control-allow-methods'], 'POST, OPTIONS');
  t.equal(r.h['access-control-allow-headers'], 'authorization, content-type');
  t.equal(r.h['access-control-max-age'], '120', 'max_age: 2m');
  t.match(r.h.vary, /Origin/);
  t.notOk(r.h['access-control-allow-credentials'], 'no credentials mode');
  t.equal(r.text, '');
  const models = await preflight(gw.url, '/v1/models/org%2Ftest-model', 'https://other.example', { 'access-control-request-method': 'GET' });
  t.equal(models.status, 204);
  t.equal(models.h['access-control-allow-methods'], 'GET, HEAD, OPTIONS');
  t.equal(models.h['access-control-allow-origin'], 'https://other.example');
  const odd = await preflight(gw.url, '/v1/embeddings', APP, { 'access-control-request-headers': 'x-ok, bad header;x' });
  t.equal(odd.status, 204);
  t.notOk(odd.h['access-control-allow-headers'], 'a malformed header list is not echoed');
});

t.test('a preflight from another origin: 403 origin_not_allowed, no CORS headers; an unknown path: 404', async (t) => {
  const r = await preflight(gw.url, '/v1/chat/completions', EVIL);
  t.equal(r.status, 403);
  t.equal(JSON.parse(r.text).error.code, 'origin_not_allowed');
  t.notOk(r.h['access-control-allow-origin']);
  t.notOk(r.h['access-control-allow-methods']);
  t.equal((await preflight(gw.url, '/v1/nowhere', APP)).status, 404);
  const sameHostOtherPort = await preflight(gw.url, '/v1/chat/completions', 'http://app.example:3001');
  t.equal(sameHostOtherPort.status, 403, 'an origin is scheme, host and port');
});

t.test('actual answers: Allow-Origin for an allowed origin only, on a stream and on a whole answer', async (t) => {
  const headers = { origin: APP, authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const stream = await call(`${gw.url}/v1/chat/completions`, { method: 'POST', headers, body: chatBody(true) });
  t.equal(stream.status, 200);
  t.match(stream.h['content-type'], /^text\/event-stream/);
  t.match(stream.text, /data: \[DONE\]\n\n$/, 'the stream arrived whole');
  t.equal(stream.h['access-control-allow-origin'], APP);
  t.match(stream.h['access-control-expose-headers'], /x-request-id/);
  t.match(stream.h.vary, /Origin/);
  const emb = await call(`${gw.url}/v1/embeddings`, { method: 'POST', headers, body: JSON.stringify({ model: MODEL, input: 'x' }) });
  t.equal(emb.status, 200);
  t.equal(emb.h['access-control-allow-origin'], APP);
  const list = await call(`${gw.url}/v1/models`, { headers });
  t.equal(list.status, 200);
  t.equal(list.h['access-control-allow-origin'], APP, 'the gateway\'s own answers too');

  const evil = await call(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { ...headers, origin: EVIL }, body: chatBody(true) });
  t.equal(evil.status, 200, 'CORS is the browser\'s guard: the request itself is served');
  t.notOk(evil.h['access-control-allow-origin'], 'but a page from another origin may not read it');
  t.notOk(evil.h['access-control-expose-headers']);
  t.match(evil.h.vary, /Origin/, 'Vary: Origin whatever the origin');
  const none = await call(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
  t.notOk(none.h['access-control-allow-origin'], 'no Origin, no CORS headers');
});

t.test('errors carry the CORS headers (a page can read why), and the token is still required', async (t) => {
  const noToken = await call(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { origin: APP, 'content-type': 'application/json' }, body: chatBody(false) });
  t.equal(noToken.status, 401, 'an actual request without a token is refused');
  t.equal(noToken.h['access-control-allow-origin'], APP);
  t.match(noToken.h['www-authenticate'], /^Bearer/);
  const badBody = await call(`${gw.url}/v1/embeddings`, { method: 'POST', headers: { origin: APP, authorization: `Bearer ${token}` }, body: '{"model":' });
  t.equal(badBody.status, 400);
  t.equal(badBody.h['access-control-allow-origin'], APP);
  const modelsNoToken = await call(`${gw.url}/v1/models/org%2Ftest-model`, { headers: { origin: APP } });
  t.equal(modelsNoToken.status, 401);
  t.equal(modelsNoToken.h['access-control-allow-origin'], APP);
  const wrongMethod = await call(`${gw.url}/v1/embeddings`, { headers: { origin: APP } });
  t.equal(wrongMethod.status, 405);
  t.equal(wrongMethod.h['access-control-allow-origin'], APP);
  t.equal(wrongMethod.h.allow, 'POST, OPTIONS');
  const evil401 = await call(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { origin: EVIL }, body: chatBody(false) });
  t.equal(evil401.status, 401);
  t.notOk(evil401.h['access-control-allow-origin']);
});

t.test('origins "*" with a fixed allow_headers list', async (t) => {
  const cfg = gatewayConfig(api.mocks.endpoints, {
    over: {
      auth: demoAuth(),
      models: [{ name: MODEL, pool: 'p' }],
      cors: { origins: '*', allow_headers: ['authorization', 'content-type'] },
    },
  });
  star = await startGateway(cfg);
  const pre = await preflight(star.url, '/v1/responses', EVIL, { 'access-control-request-headers': 'authorization, x-stainless-os' });
  t.equal(pre.status, 204);
  t.equal(pre.h['access-control-allow-origin'], '*');
  t.equal(pre.h['access-control-allow-headers'], 'authorization, content-type', 'the configured list, not what was asked');
  t.equal(pre.h['access-control-max-age'], '600', 'max_age defaults to 10m');
  const r = await call(`${star.url}/v1/embeddings`, { method: 'POST', headers: { origin: EVIL, authorization: `Bearer ${token}` }, body: JSON.stringify({ model: MODEL, input: 'x' }) });
  t.equal(r.status, 200);
  t.equal(r.h['access-control-allow-origin'], '*');
  const noOrigin = await call(`${star.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(noOrigin.h['access-control-allow-origin'], '*', 'with "*" every answer says so (no Vary needed)');
});
