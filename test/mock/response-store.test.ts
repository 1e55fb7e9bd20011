/**
 * The mock's Responses API store over HTTP, in a real `infergate mock` process: an answer is kept by the
 * server that made it, `previous_response_id` continues it there (the stored conversation leads the new
 * prompt, and is counted as cached), any other server, an unknown id or a forgotten one gets vLLM's 404,
 * and `--response-store 0` keeps nothing.
 */
import t from 'tap';
import { request } from 'undici';
import OpenAI from 'openai';
import { startMocks } from '../e2e/support.js';

async function post(ep: string, body: unknown) {
  const r = await request(`http://${ep}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.body.text();
  return { status: r.statusCode, text, json: () => JSON.parse(text) as Record<string, any> };
}

const mocks = await startMocks(2, ['--model', 'm', '--response-store', '2']);
t.teardown(() => mocks.kill());
const [a, b] = mocks.endpoints;

t.test('a stored answer is continued on its server, with the conversation as the prompt\'s cached start', async (t) => {
  const first = await post(a, { model: 'm', input: 'tell me a story about a lighthouse keeper', max_output_tokens: 20 });
  t.equal(first.status, 200);
  const r1 = first.json();
  t.match(r1.id, /^resp_/);
  t.equal(r1.store, true, 'stored by default');
  t.equal(r1.previous_response_id, null);
  t.equal(r1.usage.input_tokens_details.cached_tokens, 0);
  const second = await post(a, { model: 'm', input: 'and then?', previous_response_id: r1.id, max_output_tokens: 5 });
  t.equal(second.status, 200, second.text);
  const r2 = second.json();
  t.equal(r2.previous_response_id, r1.id);
  t.ok(r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens, 'the prompt holds the first turn, its answer and the new input');
  t.ok(r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens + r1.usage.output_tokens - 2, `the stored conversation counted as cached (${r2.usage.input_tokens_details.cached_tokens})`);
  t.ok(r2.usage.input_tokens_details.cached_tokens < r2.usage.input_tokens, 'the new input is not');

  // the other server never saw it: vLLM's not-found answer
  const elsewhere = await post(b, { model: 'm', input: 'and then?', previous_response_id: r1.id });
  t.equal(elsewhere.status, 404);
  t.same(elsewhere.json(), { error: { message: `Response with id '${r1.id}' not found.`, type: 'invalid_request_error', param: 'response_id', code: 404 } });
});

t.test('the openai SDK chains turns; store: false keeps nothing; the bound forgets the oldest', async (t) => {
  const client = new OpenAI({ baseURL: `http://${a}/v1`, apiKey: 'unused', maxRetries: 0 });
  const one = await client.responses.create({ model: 'm', input: 'hello', max_output_tokens: 4 });
  const two = await client.responses.create({ model: 'm', input: 'more', previous_response_id: one.id, max_output_tokens: 4 });
  t.ok(two.output_text.length > 0);
  const unstored = await client.responses.create({ model: 'm', input: 'hello', store: false, max_output_tokens: 4 });
  const err = await client.responses.create({ model: 'm', input: 'x', previous_response_id: unstored.id }).catch((e: unknown) => e);
  t.ok(err instanceof OpenAI.NotFoundError, `store: false is not kept (${String(err)})`);
  // the store holds 2: `one` and `two` are there; two more answers push `one` out
  await client.responses.create({ model: 'm', input: 'third', max_output_tokens: 2 });
  await client.responses.create({ model: 'm', input: 'fourth', max_output_tokens: 2 });
  const gone = await post(a, { model: 'm', input: 'x', previous_response_id: one.id });
  t.equal(gone.status, 404, 'the oldest is forgotten');
  const state = await request(`http://${a}/mock/state`);
  t.equal(((await state.body.json()) as { stored_responses: number }).stored_responses, 2, 'never more than the bound');
});

t.test('a streamed answer is stored too; a malformed id is refused', async (t) => {
  const r = await request(`http://${a}/v1/responses`, { method: 'POST', body: JSON.stringify({ model: 'm', input: 'stream me', stream: true, max_output_tokens: 3 }) });
  const text = await r.body.text();
  const created = JSON.parse(/^data: (.*)$/m.exec(text)![1]) as { type: string; response: { id: string } };
  t.equal(created.type, 'response.created');
  const next = await post(a, { model: 'm', input: 'go on', previous_response_id: created.response.id });
  t.equal(next.status, 200);
  const bad = await post(a, { model: 'm', input: 'x', previous_response_id: 42 });
  t.equal(bad.status, 400);
  t.equal(bad.json().error.param, 'previous_response_id');
});

t.test('--response-store 0: nothing kept, as vLLM without its store', async (t) => {
  const off = await startMocks(1, ['--model', 'm', '--response-store', '0']);
  t.teardown(() => off.kill());
  const r = (await post(off.endpoints[0], { model: 'm', input: 'hi', max_output_tokens: 2 })).json();
  t.equal(r.store, false);
  t.equal((await post(off.endpoints[0], { model: 'm', input: 'x', previous_response_id: r.id })).status, 404);
});
