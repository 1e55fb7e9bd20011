// vLLM's APIs for pooling models (besides embeddings) through a real gateway (JWT auth on) to real mock
// vLLM servers, as a RAG or moderation client calls them with undici: /v1/rerank (and vLLM's /rerank and
// /v2/rerank, sent on to /v1/rerank), /v1/score (and /score), /classify and /pooling; the answer passed on
// as the server gave it, usage counted, no prefix learnt, and the refusals the gateway gives before any
// server is asked.
import t from 'tap';
import { request } from 'undici';
import { debugPools, metric, scrape } from '../e2e/support.js';
import { MODEL, startApi } from './support.js';

const api = await startApi();
t.teardown(() => api.stop());
const { gw, token, otherToken } = api;

async function post(base: string, path: string, body: unknown, auth: string | null = token) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth !== null) headers.authorization = `Bearer ${auth}`;
  const r = await request(`${base}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.body.text();
  return { status: r.statusCode, text, json: () => JSON.parse(text) as Record<string, any> };
}

/** The paths the mocks were asked, oldest first (GET /mock/requests keeps the last 64 of each). */
async function pathsSeen(): Promise<string[]> {
  const out: string[] = [];
  for (const ep of api.mocks.endpoints) {
    const r = await request(`http://${ep}/mock/requests`);
    for (const q of ((await r.body.json()) as { requests: Array<{ path: string }> }).requests) out.push(q.path);
  }
  return out;
}

const query = 'Where did the cat sit?';
const documents = ['The cat sat on the mat.', 'Stock prices fell on Tuesday.', 'A cat was sitting on a mat by the door.'];

t.test('/v1/rerank: routed by model, the server\'s answer as it gave it, its usage counted', async (t) => {
  const tokensBefore = metric(await scrape(gw.adminUrl), 'infergate_tokens_total', { model: MODEL, kind: 'prompt' });
  const r = await post(gw.url, '/v1/rerank', { model: MODEL, query, documents, top_n: 2 });
  t.equal(r.status, 200, r.text.slice(0, 200));
  const body = r.json();
  t.equal(body.model, MODEL);
  t.equal(body.results.length, 2, 'top_n reached the server');
  t.ok(body.results[0].relevance_score >= body.results[1].relevance_score, 'best first');
  const straight = await post(`http://${api.mocks.endpoints[0]}`, '/v1/rerank', { model: MODEL, query, documents, top_n: 2 });
  t.same(body.results, straight.json().results, 'the same ratings as the server gives directly');
  t.same(body.usage, straight.json().usage);
  const tokensAfter = metric(await scrape(gw.adminUrl), 'infergate_tokens_total', { model: MODEL, kind: 'prompt' });
  t.equal(tokensAfter - tokensBefore, body.usage.prompt_tokens, 'the answer\'s prompt tokens counted for the model');
  t.equal((await debugPools(gw)).p.index.blocks, 0, 'nothing learnt by the prefix index (a cross-encoder reuses no cache across requests)');
});

t.test('vLLM\'s other paths: /rerank and /v2/rerank answer the same, sent on to /v1/rerank; /score and /v1/score', async (t) => {
  const want = (await post(gw.url, '/v1/rerank', { model: MODEL, query, documents })).json().results;
  for (const path of ['/rerank', '/v2/rerank']) {
    const r = await post(gw.url, path, { model: MODEL, query, documents });
    t.equal(r.status, 200, path);
    t.same(r.json().results, want, `${path}: the same results`);
  }
  const seen = await pathsSeen();
  t.notOk(seen.includes('/rerank') || seen.includes('/v2/rerank'), 'the servers were asked at /v1/rerank only');
  for (const path of ['/v1/score', '/score']) {
    const s = await post(gw.url, path, { model: MODEL, text_1: query, text_2: documents });
    t.equal(s.status, 200, path);
    const data = s.json().data as Array<{ index: number; score: number }>;
    t.same(data.map((d) => d.index), [0, 1, 2]);
    for (const x of want as Array<{ index: number; relevance_score: number }>) t.equal(data[x.index].score, x.relevance_score, `${path}: a pair rated as rerank rates it`);
  }
  t.ok((await pathsSeen()).includes('/v1/score'));
});

t.test('/classify and /pooling: input or messages, the server\'s answer as it gave it', async (t) => {
  const texts = ['What a wonderful day.', 'This is the worst service ever.'];
  const c = await post(gw.url, '/classify', { model: MODEL, input: texts });
  t.equal(c.status, 200, c.text.slice(0, 200));
  const direct = await post(`http://${api.mocks.endpoints[1]}`, '/classify', { model: MODEL, input: texts });
  t.same(c.json().data, direct.json().data, 'the same classes as the server gives directly');
  t.equal(c.json().data.length, 2);
  const chat = await post(gw.url, '/classify', { model: MODEL, messages: [{ role: 'user', content: texts[0] }] });
  t.equal(chat.status, 200, 'chat messages');
  const p = await post(gw.url, '/pooling', { model: MODEL, input: texts[0] });
  t.equal(p.status, 200);
  t.equal(p.json().data[0].object, 'pooling');
  t.ok(Array.isArray(p.json().data[0].data) && p.json().data[0].data.length > 0, 'the pooled output');
  t.equal((await debugPools(gw)).p.index.blocks, 0, 'nothing learnt by the prefix index');
  const seen = await pathsSeen();
  t.ok(seen.includes('/classify') && seen.includes('/pooling'), 'each sent to its own path');
});

t.test('refusals: OpenAI-style errors from the gateway, before any server is asked', async (t) => {
  const before = (await pathsSeen()).length;
  const cases: Array<[string, string, unknown, number, string, string | null]> = [
    ['no query', '/v1/rerank', { model: MODEL, documents }, 400, 'invalid_field', 'query'],
    ['documents not a list', '/v1/rerank', { model: MODEL, query, documents: 'one' }, 400, 'invalid_field', 'documents'],
    ['no model', '/v1/rerank', { query, documents }, 400, 'missing_model', 'model'],
    ['one text to score', '/v1/score', { model: MODEL, text_1: query }, 400, 'invalid_field', 'text_1'],
    ['an unknown model', '/score', { model: 'no-such-model', text_1: 'a', text_2: 'b' }, 404, 'model_not_found', 'model'],
    ['not JSON', '/v2/rerank', '{"model":', 400, 'invalid_json', null],
    ['nothing to classify', '/classify', { model: MODEL }, 400, 'invalid_field', 'input'],
    ['a message without role', '/pooling', { model: MODEL, messages: [{ content: 'x' }] }, 400, 'invalid_field', 'messages'],
  ];
  for (const [name, path, body, status, code, param] of cases) {
    const r = await post(gw.url, path, body);
    t.equal(r.status, status, name);
    t.match(r.json(), { error: { code, param } }, name);
  }
  t.equal((await post(gw.url, '/v1/rerank', { model: MODEL, query, documents }, otherToken)).status, 403, 'a token for other models: 403');
  t.equal((await post(gw.url, '/rerank', { model: MODEL, query, documents }, null)).status, 401, 'no token: 401');
  t.equal((await pathsSeen()).length, before, 'no server was asked');
  const get = await request(`${gw.url}/v1/rerank`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(get.statusCode, 405, 'GET on a POST route: 405');
  t.match(get.headers.allow, /POST/);
  await get.body.dump();
});
