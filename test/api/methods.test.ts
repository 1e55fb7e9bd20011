// 405 Method Not Allowed carries Allow on every known path, on both ports; OPTIONS on a known path is
// answered 204 with Allow (RFC 9110 §9.3.7) even without CORS; an unknown path stays 404 without Allow.
// Real gateway (auth on: none of these needs a token), undici.
import t from 'tap';
import { request } from 'undici';
import { startApi } from './support.js';

const api = await startApi();
t.teardown(() => api.stop());
const { gw } = api;

async function call(base: string, method: string, path: string) {
  const r = await request(`${base}${path}`, { method: method as 'GET' });
  const text = await r.body.text();
  return { status: r.statusCode, allow: r.headers.allow, headers: r.headers, text };
}

t.test('a wrong method on a known client path: 405 method_not_allowed, with Allow', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['GET', '/v1/chat/completions', 'POST, OPTIONS'],
    ['PUT', '/v1/completions', 'POST, OPTIONS'],
    ['GET', '/v1/embeddings', 'POST, OPTIONS'],
    ['DELETE', '/v1/responses', 'POST, OPTIONS'],
    ['GET', '/tokenize', 'POST, OPTIONS'],
    ['HEAD', '/detokenize', 'POST, OPTIONS'],
    ['GET', '/v1/rerank', 'POST, OPTIONS'],
    ['PUT', '/v2/rerank', 'POST, OPTIONS'],
    ['GET', '/score', 'POST, OPTIONS'],
    ['GET', '/classify', 'POST, OPTIONS'],
    ['DELETE', '/pooling', 'POST, OPTIONS'],
    ['GET', '/v1/audio/transcriptions', 'POST, OPTIONS'],
    ['PUT', '/v1/audio/translations', 'POST, OPTIONS'],
    ['POST', '/v1/models', 'GET, HEAD, OPTIONS'],
    ['DELETE', '/v1/models/org%2Ftest-model', 'GET, HEAD, OPTIONS'],
    ['PATCH', '/v1/models/anything/at/all', 'GET, HEAD, OPTIONS'],
    // relayed to the model server that stored it: no HEAD (README, "HTTP surface")
    ['HEAD', '/v1/responses/resp_abc', 'GET, OPTIONS'],
    ['PUT', '/v1/responses/resp_abc', 'GET, OPTIONS'],
  ];
  for (const [method, path, allow] of cases) {
    const r = await call(gw.url, method, path);
    t.equal(r.status, 405, `${method} ${path}`);
    t.equal(r.allow, allow, `${method} ${path}: Allow`);
    if (method !== 'HEAD') t.match(JSON.parse(r.text), { error: { code: 'method_not_allowed', type: 'invalid_request_error' } });
    else t.equal(r.text, '', 'HEAD: no body');
  }
});

t.test('OPTIONS on a known path: 204 with Allow and no body; on an unknown one: 404', async (t) => {
  const chat = await call(gw.url, 'OPTIONS', '/v1/chat/completions');
  t.equal(chat.status, 204);
  t.equal(chat.allow, 'POST, OPTIONS');
  t.equal(chat.text, '');
  t.notOk(chat.headers['access-control-allow-origin'], 'no CORS headers without a cors section');
  t.equal((await call(gw.url, 'OPTIONS', '/v1/models')).allow, 'GET, HEAD, OPTIONS');
  const unknown = await call(gw.url, 'OPTIONS', '/v1/nothing');
  t.equal(unknown.status, 404);
  t.notOk(unknown.allow);
  const missing = await call(gw.url, 'GET', '/v1/nothing');
  t.equal(missing.status, 404, 'an unknown path is 404 whatever the method');
  t.equal(JSON.parse(missing.text).error.code, 'not_found');
  t.notOk(missing.allow);
});

t.test('the admin port: the same rules', async (t) => {
  const r = await call(gw.adminUrl, 'POST', '/metrics');
  t.equal(r.status, 405);
  t.equal(r.allow, 'GET, HEAD, OPTIONS');
  t.equal((await call(gw.adminUrl, 'DELETE', '/readyz')).allow, 'GET, HEAD, OPTIONS');
  t.equal((await call(gw.adminUrl, 'OPTIONS', '/healthz')).status, 204);
  t.equal((await call(gw.adminUrl, 'POST', '/nothing')).status, 404);
});

t.test('the right method still works after all that (the connection pool and the process are fine)', async (t) => {
  const r = await request(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${api.token}` } });
  t.equal(r.statusCode, 200);
  t.ok(((await r.body.json()) as { data: unknown[] }).data.length >= 2);
});
