// The API surface beyond chat and completions, as clients use it, through a real gateway (JWT auth on) to
// real mock vLLM servers: the openai SDK's models.retrieve, embeddings.create (float and its default
// base64) and responses.create (whole and streamed); vLLM's /tokenize and /detokenize with undici; each
// route's refusals (bad bodies, no token, a token for other models).
import t from 'tap';
import OpenAI from 'openai';
import { request } from 'undici';
import { debugPools } from '../e2e/support.js';
import { ADAPTER, MODEL, startApi } from './support.js';
import { until } from '../helpers/process.js';

const api = await startApi({}, { prefix: { embeddings: true } });
t.teardown(() => api.stop());
const { gw, token, otherToken } = api;
const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: token, maxRetries: 0 });
const direct = new OpenAI({ baseURL: `http://${api.mocks.endpoints[0]}/v1`, apiKey: 'unused', maxRetries: 0 });

/** A POST with the token (`auth`), another token, or none (null). */
async function post(path: string, body: unknown, auth: string | null = token) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth !== null) headers.authorization = `Bearer ${auth}`;
  const r = await request(`${gw.url}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text, json: () => JSON.parse(text) as Record<string, any> };
}

t.test('models.retrieve: a model with a slash in its id, an alias, an unknown one, one the token does not allow', async (t) => {
  const m = await client.models.retrieve(MODEL); // the SDK sends org%2Ftest-model
  t.match(m, { id: MODEL, object: 'model', owned_by: 'infergate' });
  t.type(m.created, 'number');
  t.equal((await client.models.retrieve('alias')).id, 'alias', 'an alias is a model to its clients');
  const missing = await client.models.retrieve('no-such-model').catch((e: unknown) => e);
  t.ok(missing instanceof OpenAI.NotFoundError, 'unknown: the SDK raises NotFoundError');
  t.equal((missing as InstanceType<typeof OpenAI.APIError>).code, 'model_not_found');
  const other = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: otherToken, maxRetries: 0 });
  const hidden = await other.models.retrieve(MODEL).catch((e: unknown) => e);
  t.ok(hidden instanceof OpenAI.NotFoundError, 'a model the token may not use is not found (as it is not listed)');
  const anonymous = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'not-a-jwt', maxRetries: 0 });
  t.ok((await anonymous.models.retrieve(MODEL).catch((e: unknown) => e)) instanceof OpenAI.AuthenticationError, 'a bad token: 401');

  const auth = { authorization: `Bearer ${token}` };
  const plain = await request(`${gw.url}/v1/models/${MODEL}`, { headers: auth }); // the slash not encoded, as curl users write it
  t.equal(plain.statusCode, 200);
  t.equal(((await plain.body.json()) as { id: string }).id, MODEL);
  const broken = await request(`${gw.url}/v1/models/org%E0%A4%A`, { headers: auth });
  t.equal(broken.statusCode, 400, 'bad percent-encoding: 400');
  t.match(await broken.body.json(), { error: { code: 'invalid_field', param: 'model' } });
  const notUtf8 = await request(`${gw.url}/v1/models/%FF%FE`, { headers: auth });
  t.equal(notUtf8.statusCode, 400, 'percent-encoded bytes that are not UTF-8: 400');
  await notUtf8.body.dump();
  const head = await request(`${gw.url}/v1/models/org%2Ftest-model`, { method: 'HEAD', headers: auth });
  t.equal(head.statusCode, 200, 'HEAD answers too');
  t.equal(await head.body.text(), '');
  const noToken = await request(`${gw.url}/v1/models/org%2Ftest-model`);
  t.equal(noToken.statusCode, 401);
  t.match(noToken.headers['www-authenticate'], /^Bearer/);
  await noToken.body.dump();
});

t.test('the model list carries the context length the servers report (max_model_len, as vLLM\'s own list does)', async (t) => {
  const auth = { authorization: `Bearer ${token}` };
  const listed = async () => ((await (await request(`${gw.url}/v1/models`, { headers: auth })).body.json()) as { data: Array<Record<string, unknown>> }).data;
  // the gateway reads each server's /v1/models with its metrics: wait for the first reading
  const data = await until(async () => {
    const d = await listed();
    return d.every((m) => m.max_model_len !== undefined) ? d : undefined;
  }, 20_000, 'max_model_len in every card');
  const straight = (await (await request(`http://${api.mocks.endpoints[0]}/v1/models`)).body.json()) as { data: Array<{ id: string; max_model_len?: number }> };
  const base = straight.data.find((m) => m.id === MODEL)!.max_model_len;
  t.type(base, 'number');
  for (const m of data) t.equal(m.max_model_len, base, `${String(m.id)}: the base model's (an adapter and an alias too)`);
  const one = (await (await request(`${gw.url}/v1/models/${encodeURIComponent(ADAPTER)}`, { headers: auth })).body.json()) as Record<string, unknown>;
  t.equal(one.max_model_len, base, 'GET /v1/models/{id} too');
});

t.test('embeddings.create: the default base64 and float agree, token-id input, usage, and the same vectors as the server gives', async (t) => {
  const input = ['The quick brown fox', 'jumps over the lazy dog'];
  const b64 = await client.embeddings.create({ model: MODEL, input }); // the SDK asks for base64 and decodes it
  const floats = await client.embeddings.create({ model: MODEL, input, encoding_format: 'float' });
  t.equal(b64.object, 'list');
  t.equal(b64.data.length, 2);
  t.same(b64.data.map((d) => d.index), [0, 1]);
  const v = b64.data[0].embedding;
  t.equal(v.length, 128, 'the mock model has 128 dimensions');
  t.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5, 'a unit vector');
  t.same(b64.data.map((d) => d.embedding), floats.data.map((d) => d.embedding), 'base64 decodes to the float answer');
  t.notSame(b64.data[0].embedding, b64.data[1].embedding, 'different inputs, different vectors');
  t.ok(b64.usage.prompt_tokens > 0 && b64.usage.total_tokens === b64.usage.prompt_tokens, `usage ${JSON.stringify(b64.usage)}`);
  const straight = await direct.embeddings.create({ model: MODEL, input, encoding_format: 'float' });
  t.same(floats.data, straight.data, 'the gateway passes the answer on as the server gave it');
  const ids = await client.embeddings.create({ model: MODEL, input: [[1, 2, 3], [4, 5]], dimensions: 16 });
  t.same(ids.data.map((d) => d.embedding.length), [16, 16], 'token-id lists and dimensions');
  const viaAlias = await client.embeddings.create({ model: 'alias', input: 'x y z', encoding_format: 'float' });
  t.equal(viaAlias.data.length, 1, 'an alias routes embeddings like the rest');
});

t.test('embeddings refusals: OpenAI-style 400s from the gateway, before any server is asked', async (t) => {
  const bad = await client.embeddings.create({ model: MODEL, input: [] }).catch((e: unknown) => e);
  t.ok(bad instanceof OpenAI.BadRequestError);
  t.match(bad, { code: 'invalid_field', param: 'input' });
  const cases: Array<[string, unknown, string]> = [
    ['no input', { model: MODEL }, 'input'],
    ['an empty string', { model: MODEL, input: '' }, 'input'],
    ['mixed list', { model: MODEL, input: ['a', 1] }, 'input'],
    ['a negative token id', { model: MODEL, input: [1, -1] }, 'input'],
    ['too many inputs', { model: MODEL, input: new Array(2049).fill('x') }, 'input'],
    ['an unknown encoding', { model: MODEL, input: 'a', encoding_format: 'int8' }, 'encoding_format'],
  ];
  for (const [name, body, param] of cases) {
    const r = await post('/v1/embeddings', body);
    t.equal(r.status, 400, name);
    t.match(r.json(), { error: { type: 'invalid_request_error', param } }, name);
  }
  const deep = await post('/v1/embeddings', `{"model":"${MODEL}","input":${'['.repeat(500)}1${']'.repeat(500)}}`);
  t.equal(deep.status, 400, 'nesting past max_json_depth');
  t.equal(deep.json().error.code, 'json_too_deep');
  const unknown = await post('/v1/embeddings', { model: 'no-such-model', input: 'a' });
  t.equal(unknown.status, 404);
  t.equal(unknown.json().error.code, 'model_not_found');
  const forbidden = await post('/v1/embeddings', { model: MODEL, input: 'a' }, otherToken);
  t.equal(forbidden.status, 403);
  t.equal(forbidden.json().error.code, 'model_not_allowed');
  const noToken = await post('/v1/embeddings', { model: MODEL, input: 'a' }, null);
  t.equal(noToken.status, 401);
  // bytes that are not UTF-8 inside a string: read with replacement characters, as for chat (the server decides)
  const raw = Buffer.concat([Buffer.from(`{"model":"${MODEL}","input":"ab`), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
  const odd = await request(`${gw.url}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: raw });
  t.equal(odd.statusCode, 200, 'not-UTF-8 bytes neither crash nor hang the gateway');
  t.equal(((await odd.body.json()) as { data: unknown[] }).data.length, 1);
});

t.test('prefix affinity: off for embeddings by default (nothing learnt), on where the pool asks (prefix.embeddings)', async (t) => {
  const blocks = async (pool: string) => (await debugPools(gw))[pool].index.blocks;
  const text = 'A long document to embed. '.repeat(40);
  for (let i = 0; i < 3; i++) await client.embeddings.create({ model: MODEL, input: `${text} ${i}` });
  t.equal(await blocks('p'), 0, 'pool p (the default) learnt nothing from embeddings');
  await client.embeddings.create({ model: ADAPTER, input: text });
  t.ok((await blocks('q')) > 0, 'pool q (prefix.embeddings: true) learnt the input');
  await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: text }], max_tokens: 2 });
  t.ok((await blocks('p')) > 0, 'chat requests on pool p are still learnt');
});

t.test('responses.create: whole and streamed, the same text', async (t) => {
  const whole = await client.responses.create({ model: MODEL, input: 'Write a haiku about routers.', instructions: 'Be brief.', max_output_tokens: 6 });
  t.equal(whole.object, 'response');
  t.ok(whole.output_text.length > 0, `output_text: ${whole.output_text}`);
  t.equal(whole.usage?.output_tokens, 6);
  const stream = await client.responses.create({ model: MODEL, input: 'Write a haiku about routers.', instructions: 'Be brief.', max_output_tokens: 6, stream: true });
  let text = '';
  const types: string[] = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  t.equal(types[0], 'response.created');
  t.match(types.at(-1), /^response\.(completed|incomplete)$/);
  t.equal(text, whole.output_text, 'the streamed deltas make the whole answer');
  const bad = await client.responses.create({ model: MODEL, input: [] }).catch((e: unknown) => e);
  t.ok(bad instanceof OpenAI.BadRequestError, 'an empty input: 400');
  t.match(bad, { param: 'input' });
});

t.test('/tokenize and /detokenize: routed by model, answered as vLLM does', async (t) => {
  const tok = await post('/tokenize', { model: MODEL, prompt: 'Hello there, tokenizer.' });
  t.equal(tok.status, 200, tok.text);
  const body = tok.json();
  t.equal(body.count, body.tokens.length);
  t.type(body.max_model_len, 'number');
  const straight = await request(`http://${api.mocks.endpoints[1]}/tokenize`, { method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'Hello there, tokenizer.' }) });
  t.same(await straight.body.json(), body, 'what the server itself answers');
  const chat = await post('/tokenize', { model: 'alias', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(chat.status, 200, 'messages, through an alias');
  t.ok(chat.json().count > 0);
  const detok = await post('/detokenize', { model: MODEL, tokens: body.tokens });
  t.equal(detok.status, 200);
  t.type(detok.json().prompt, 'string');
  t.ok(detok.json().prompt.length > 0);
  const refusals: Array<[string, unknown, string]> = [
    ['/tokenize', { model: MODEL }, 'prompt'],
    ['/tokenize', { model: MODEL, prompt: 'a', messages: [{ role: 'user', content: 'b' }] }, 'prompt'],
    ['/tokenize', { model: MODEL, messages: [{ content: 'no role' }] }, 'messages'],
    ['/detokenize', { model: MODEL, tokens: [] }, 'tokens'],
    ['/detokenize', { model: MODEL, tokens: ['1'] }, 'tokens'],
  ];
  for (const [path, b, param] of refusals) {
    const r = await post(path, b);
    t.equal(r.status, 400, `${path} ${JSON.stringify(b)}`);
    t.equal(r.json().error.param, param);
  }
  const noModel = await post('/tokenize', { prompt: 'a' });
  t.equal(noModel.status, 400, 'routing needs the model');
  t.equal(noModel.json().error.code, 'missing_model');
  const outOfVocab = await post('/detokenize', { model: MODEL, tokens: [999_999_999] });
  t.equal(outOfVocab.status, 400, "the server's own refusal is passed on");
  t.equal((await post('/tokenize', { model: MODEL, prompt: 'a' }, null)).status, 401, 'a token is needed');
});

t.test('GET /health on the client port: vLLM\'s liveness path, no token needed, nothing about the pools', async (t) => {
  for (const method of ['GET', 'HEAD'] as const) {
    const r = await request(`${gw.url}/health`, { method });
    t.equal(r.statusCode, 200, method);
    t.match(r.headers['content-type'], /application\/json/);
    const body = await r.body.text();
    t.equal(body, method === 'GET' ? '{"status":"ok"}' : '');
  }
  const post = await request(`${gw.url}/health`, { method: 'POST' });
  t.equal(post.statusCode, 405);
  t.match(post.headers.allow, /GET/);
  await post.body.dump();
});
