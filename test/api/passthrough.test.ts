// What the gateway sends for each routed API and what it passes back, seen from a scriptable model server:
// each kind goes to its own path with the client's bytes; a server without the Responses API answers its
// own 404, which the openai SDK receives as is; a server's own CORS headers never reach the client;
// tokenizing charges no tokens to the tenant (no model runs), embedding does, and reranking the query once
// per document.
import t from 'tap';
import OpenAI from 'openai';
import { request } from 'undici';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startUpstream } from '../helpers/upstream.js';

const up = await startUpstream((req, res) => {
  if (req.url === '/v1/responses') {
    // what FastAPI answers for a route it does not have (an engine without the Responses API)
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
    return;
  }
  // vLLM's CORS middleware, on by default for any origin
  res.writeHead(200, { 'content-type': 'application/json', 'access-control-allow-origin': '*', 'access-control-allow-credentials': 'true' });
  res.end(JSON.stringify({ path: req.url }));
});
const LIMIT = 1_000_000;
const gw = await startGateway(gatewayConfig([up.endpoint], { over: { tenants: { default: { tokens_per_minute: LIMIT } } } }));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

t.test('each API goes to its own path upstream, its body as the client sent it', async (t) => {
  const cases: Array<[string, string]> = [
    ['/v1/embeddings', '{"model":"test-model","input":["a","b"],"encoding_format":"base64"}'],
    ['/tokenize', '{"model":"test-model","prompt":"hello","add_special_tokens":false}'],
    ['/detokenize', '{"model":"test-model","tokens":[1,2,3]}'],
    ['/v1/rerank', '{"model":"test-model","query":"q","documents":["a","b"],"top_n":1}'],
    ['/v1/score', '{"model":"test-model","text_1":"q","text_2":["a","b"]}'],
    ['/classify', '{"model":"test-model","input":["good","bad"]}'],
    ['/pooling', '{"model":"test-model","messages":[{"role":"user","content":"hi"}]}'],
  ];
  for (const [path, body] of cases) {
    const before = up.received.length;
    const r = await request(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'https://page.example' }, body });
    t.equal(r.statusCode, 200, path);
    t.same(await r.body.json(), { path }, `${path}: the server's answer`);
    t.notOk(r.headers['access-control-allow-origin'], `${path}: the server's CORS headers are dropped (cors is off here)`);
    t.notOk(r.headers['access-control-allow-credentials']);
    const got = up.received[before];
    t.equal(got.url, path);
    t.equal(got.body, body, 'the bytes as sent');
  }
});

t.test('vLLM\'s other rerank and score paths go to the API\'s own path, the body as sent', async (t) => {
  for (const [path, upstream] of [['/rerank', '/v1/rerank'], ['/v2/rerank', '/v1/rerank'], ['/score', '/v1/score']]) {
    const body = path.includes('rerank') ? '{"model":"test-model","query":"q","documents":["a"]}' : '{"model":"test-model","text_1":"q","text_2":"a"}';
    const before = up.received.length;
    const r = await request(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    t.equal(r.statusCode, 200, path);
    t.same(await r.body.json(), { path: upstream }, `${path}: answered by the server's ${upstream}`);
    t.equal(up.received[before].url, upstream);
    t.equal(up.received[before].body, body, 'the bytes as sent');
  }
});

t.test('a server without the Responses API: its 404 is passed on, the SDK raises NotFoundError', async (t) => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const before = up.received.length;
  const err = await client.responses.create({ model: 'test-model', input: 'hi' }).catch((e: unknown) => e);
  t.ok(err instanceof OpenAI.NotFoundError, String(err));
  t.equal(up.received.length, before + 1, 'asked once: a 404 is an answer, not a failure to retry');
  t.equal(up.received[before].url, '/v1/responses');
  const raw = await request(`${gw.url}/v1/responses`, { method: 'POST', body: '{"model":"test-model","input":"hi"}' });
  t.equal(raw.statusCode, 404);
  t.same(await raw.body.json(), { detail: 'Not Found' }, 'the body as the server gave it');
});

t.test('tokens_per_minute: tokenizing charges nothing, embedding charges its input', async (t) => {
  const text = 'word '.repeat(2000);
  const remaining = async (path: string, body: unknown) => {
    const r = await request(`${gw.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
    await r.body.dump();
    t.equal(r.statusCode, 200, path);
    return Number(r.headers['x-ratelimit-remaining-tokens']);
  };
  const afterTokenize = await remaining('/tokenize', { model: 'test-model', prompt: text });
  const afterDetokenize = await remaining('/detokenize', { model: 'test-model', tokens: new Array(2000).fill(7) });
  t.ok(afterTokenize >= LIMIT - 10 && afterDetokenize >= LIMIT - 10, `nothing charged (${afterTokenize}, ${afterDetokenize} of ${LIMIT} left)`);
  const afterEmbed = await remaining('/v1/embeddings', { model: 'test-model', input: text });
  t.ok(afterEmbed < afterDetokenize - 2000, `the embedding's ~2500 tokens charged (${afterEmbed} left)`);
  // a cross-encoder reads the query with each document: four documents, the query's tokens four times
  const afterRerank = await remaining('/v1/rerank', { model: 'test-model', query: text, documents: ['a', 'b', 'c', 'd'] });
  const embedCharge = afterDetokenize - afterEmbed;
  const rerankCharge = afterEmbed - afterRerank;
  t.ok(rerankCharge > 3 * embedCharge && rerankCharge < 5 * embedCharge, `a rerank of the same text against 4 documents: ${rerankCharge} tokens, the embedding ${embedCharge}`);
});
