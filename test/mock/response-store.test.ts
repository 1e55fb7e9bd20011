/**
 * The mock's Responses API store over HTTP, in a real `infergate mock` process: an answer is kept by the
 * server that made it, `previous_response_id` continues it there (the stored conversation leads the new
 * prompt, and is counted as cached), any other server, an unknown id or a forgotten one gets vLLM's 404,
 * and `--response-store 0` keeps nothing. A stored answer's retrieve and cancel as vLLM serves them, and
 * `background: true`.
 */
import t from 'tap';
import { request } from 'undici';
import OpenAI from 'openai';
import { startMocks, until } from '../e2e/support.js';

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

async function call(url: string, method: 'GET' | 'POST' | 'DELETE') {
  const r = await request(url, { method });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text, json: () => JSON.parse(text) as Record<string, any> };
}

t.test('retrieve: the stored answer on its server, 404 elsewhere; ?stream=true replays its events', async (t) => {
  const made = await post(a, { model: 'm', input: 'keep this one', max_output_tokens: 4 });
  const id = made.json().id as string;
  const got = await call(`http://${a}/v1/responses/${id}`, 'GET');
  t.equal(got.status, 200);
  t.same(got.json(), made.json(), 'the response as it was answered');
  t.equal((await call(`http://${a}/v1/responses/${encodeURIComponent(id)}`, 'GET')).status, 200, 'the id percent-encoded: decoded as Starlette does');
  const other = await call(`http://${b}/v1/responses/${id}`, 'GET');
  t.equal(other.status, 404);
  t.same(other.json(), { error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', param: 'response_id', code: 404 } });
  const replay = await call(`http://${a}/v1/responses/${id}?stream=true&starting_after=1`, 'GET');
  t.match(replay.headers['content-type'], /^text\/event-stream/);
  const events = [...replay.text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]) as { type: string; sequence_number: number });
  t.equal(events[0].sequence_number, 2, 'the events after starting_after');
  t.equal(events.at(-1)!.type, 'response.incomplete');
  t.equal((await call(`http://${a}/v1/responses/${id}?stream=true&starting_after=x`, 'GET')).status, 400, 'starting_after not an integer');
  t.equal((await call(`http://${a}/v1/responses/${id}`, 'DELETE')).status, 404, 'no DELETE, as in vLLM');
});

t.test('background and cancel: queued until its decode time has passed; cancel only while it runs', async (t) => {
  const slow = await startMocks(1, ['--model', 'm', '--decode-ms', '5000']);
  t.teardown(() => slow.kill());
  const [s] = slow.endpoints;
  const long = await post(s, { model: 'm', input: 'a long job', background: true, max_output_tokens: 20 });
  t.equal(long.status, 200, long.text);
  t.match(long.json(), { status: 'queued', output: [], store: true });
  const id = long.json().id as string;
  t.equal((await call(`http://${s}/v1/responses/${id}`, 'GET')).json().status, 'queued', 'still running (20 tokens of 5 s)');
  const cancelled = await call(`http://${s}/v1/responses/${id}/cancel`, 'POST');
  t.equal(cancelled.status, 200);
  t.match(cancelled.json(), { id, status: 'cancelled' });
  t.equal((await call(`http://${s}/v1/responses/${id}`, 'GET')).json().status, 'cancelled');
  const twice = await call(`http://${s}/v1/responses/${id}/cancel`, 'POST');
  t.equal(twice.status, 400);
  t.same(twice.json(), { error: { message: 'Cannot cancel a synchronous response.', type: 'invalid_request_error', param: null, code: 400 } });
  t.equal((await call(`http://${s}/v1/responses/resp_nope/cancel`, 'POST')).status, 404);

  // at the default decode time a short background answer completes soon
  const quick = (await post(a, { model: 'm', input: 'quick job', background: true, max_output_tokens: 3 })).json();
  await until(async () => (await call(`http://${a}/v1/responses/${quick.id}`, 'GET')).json().status === 'incomplete', 10_000, 'the background answer to complete');
  const done = (await call(`http://${a}/v1/responses/${quick.id}`, 'GET')).json();
  t.ok(done.output[0].content[0].text.length > 0, 'with its output');
  t.equal((await call(`http://${a}/v1/responses/${quick.id}/cancel`, 'POST')).status, 400, 'a finished one cannot be cancelled');
  const refused = await post(a, { model: 'm', input: 'x', background: true, store: false });
  t.equal(refused.status, 400, 'background needs store');
  t.equal(refused.json().error.param, 'background');
});
