/**
 * Responses API conversations through a real gateway (dist/cli.js) in front of three real mock servers,
 * each keeping its own answers (as vLLM does in memory): with round_robin, every turn chained by
 * `previous_response_id` reaches the server that stored the turn before (x-infergate-endpoint), streamed
 * or not; an unknown id gets the server's 404 as it is; a malformed one is refused by the gateway without
 * reaching a server; a pinned server removed by a reload, or an id the bounded map forgot, is routed as any
 * request. And the id read through the answer's usage reader (AnswerUsage's hooks), on answers cut at every
 * byte, with escapes, nesting, and past the size that reader keeps.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { request } from 'undici';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { gatewayConfig, metric, scrape, startGateway, startMocks, until } from '../e2e/support.js';
import { ResponseAffinity, ResponseIdWatch } from '../../src/gateway/response-affinity.js';
import { AnswerUsage } from '../../src/openai/usage.js';

const mocks = await startMocks(3, ['--model', 'test-model']);
t.teardown(() => mocks.kill());
const config = gatewayConfig(mocks.endpoints, { over: { response_affinity: { max_entries: 4, ttl: '1h' } } });
const gw = await startGateway(config);
t.teardown(() => gw.stop());
const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });

async function affinity(adminUrl: string, outcome: string): Promise<number> {
  return metric(await scrape(adminUrl), 'infergate_response_affinity_total', { pool: 'p', outcome });
}

async function post(url: string, body: string | Buffer) {
  const r = await request(`${url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text };
}

/** How many inference requests each mock has seen (GET /mock/requests keeps the last 64). */
async function seenByMocks(): Promise<number> {
  let n = 0;
  for (const ep of mocks.endpoints) {
    const r = await request(`http://${ep}/mock/requests`);
    n += ((await r.body.json()) as { requests: unknown[] }).requests.length;
  }
  return n;
}

t.test('a conversation of 4 turns: each turn reaches the server that stored the one before', async (t) => {
  const pinnedBefore = await affinity(gw.adminUrl, 'pinned');
  let previous: string | undefined;
  let endpoint: string | undefined;
  const requestIds: string[] = [];
  for (let turn = 1; turn <= 4; turn++) {
    const { data, response } = await client.responses
      .create({ model: 'test-model', input: `turn ${turn}: tell me more`, max_output_tokens: 8, ...(previous && { previous_response_id: previous }) })
      .withResponse();
    const served = response.headers.get('x-infergate-endpoint')!;
    t.ok(mocks.endpoints.includes(served), `turn ${turn} served by ${served}`);
    if (endpoint !== undefined) t.equal(served, endpoint, `turn ${turn} on the server that stored turn ${turn - 1}`);
    if (previous !== undefined) {
      t.ok(data.usage!.input_tokens_details.cached_tokens > 0, `turn ${turn}: the stored conversation is that server's cached prefix`);
    }
    t.ok(data.output_text.length > 0);
    requestIds.push(response.headers.get('x-request-id')!);
    previous = data.id;
    endpoint = served;
  }
  t.equal((await affinity(gw.adminUrl, 'pinned')) - pinnedBefore, 3, 'three follow-ups pinned');
  // round_robin alone would have moved on: a new conversation goes to the next server
  const other = await client.responses.create({ model: 'test-model', input: 'a new conversation', max_output_tokens: 2 }).withResponse();
  t.not(other.response.headers.get('x-infergate-endpoint'), endpoint, 'a request without previous_response_id is routed by the policy');
  const r = await request(`${gw.adminUrl}/debug/decisions?n=50`);
  const { decisions } = (await r.body.json()) as { decisions: Array<{ req_id: string; pinned_by?: string }> };
  const pinned = decisions.filter((d) => requestIds.includes(d.req_id) && d.pinned_by === 'previous_response_id');
  t.equal(pinned.length, 3, '/debug/decisions says why: pinned by previous_response_id');
});

t.test('the same conversation streamed: the id is read from the stream as it passes', async (t) => {
  let previous: string | undefined;
  let endpoint: string | undefined;
  for (let turn = 1; turn <= 4; turn++) {
    const { data: stream, response } = await client.responses
      .create({ model: 'test-model', input: `streamed turn ${turn}`, max_output_tokens: 6, stream: true, ...(previous && { previous_response_id: previous }) })
      .withResponse();
    const served = response.headers.get('x-infergate-endpoint')!;
    if (endpoint !== undefined) t.equal(served, endpoint, `streamed turn ${turn} on the server that stored turn ${turn - 1}`);
    let completed: string | undefined;
    let deltas = 0;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') deltas++;
      if (ev.type === 'response.completed' || ev.type === 'response.incomplete') completed = ev.response.id;
    }
    t.ok(deltas > 0 && completed, `turn ${turn}: a whole stream`);
    previous = completed;
    endpoint = served;
  }
});

t.test("an unknown id: the server's not-found answer is passed on", async (t) => {
  const unknownBefore = await affinity(gw.adminUrl, 'unknown');
  const r = await post(gw.url, JSON.stringify({ model: 'test-model', input: 'hi', previous_response_id: 'resp_never_made' }));
  t.equal(r.status, 404);
  t.same(JSON.parse(r.text), { error: { message: "Response with id 'resp_never_made' not found.", type: 'invalid_request_error', param: 'response_id', code: 404 } });
  const err = await client.responses.create({ model: 'test-model', input: 'hi', previous_response_id: 'resp_other' }).catch((e: unknown) => e);
  t.ok(err instanceof OpenAI.NotFoundError, String(err));
  t.equal((await affinity(gw.adminUrl, 'unknown')) - unknownBefore, 2, 'counted as unknown');
});

t.test('a malformed previous_response_id: 400 from the gateway, no server asked', async (t) => {
  const cases: Array<[string, string | Buffer]> = [
    ['a number', '{"model":"test-model","input":"hi","previous_response_id":42}'],
    ['an object', '{"model":"test-model","input":"hi","previous_response_id":{"id":"resp_1"}}'],
    ['a list', '{"model":"test-model","input":"hi","previous_response_id":["resp_1"]}'],
    ['empty', '{"model":"test-model","input":"hi","previous_response_id":""}'],
    ['huge', JSON.stringify({ model: 'test-model', input: 'hi', previous_response_id: 'resp_' + 'x'.repeat(1_000_000) })],
    ['a NUL', '{"model":"test-model","input":"hi","previous_response_id":"resp_\\u0000"}'],
    ['a lone surrogate', '{"model":"test-model","input":"hi","previous_response_id":"resp_\\udc80"}'],
    ['non-ASCII', '{"model":"test-model","input":"hi","previous_response_id":"resp_caf\u00e9"}'],
    ['bytes that are not UTF-8', Buffer.concat([Buffer.from('{"model":"test-model","input":"hi","previous_response_id":"resp_'), Buffer.from([0xff, 0xfe, 0x80]), Buffer.from('"}')])],
  ];
  const seen = await seenByMocks();
  for (const [what, body] of cases) {
    const r = await post(gw.url, body);
    t.equal(r.status, 400, what);
    const e = JSON.parse(r.text) as { error: { param: string; type: string; message: string } };
    t.equal(e.error.param, 'previous_response_id', `${what}: names the field`);
    t.equal(e.error.type, 'invalid_request_error');
    t.ok(e.error.message.length < 200, `${what}: the answer does not echo the id`);
  }
  t.equal(await seenByMocks(), seen, 'none reached a server');
  const ok = await client.responses.create({ model: 'test-model', input: 'still serving', max_output_tokens: 2 });
  t.ok(ok.id, 'the gateway serves on');
});

t.test('the bound: past max_entries the oldest id is forgotten and its follow-up routed normally', async (t) => {
  const first = await client.responses.create({ model: 'test-model', input: 'the oldest', max_output_tokens: 2 });
  const kept = [];
  for (let i = 0; i < 4; i++) kept.push(await client.responses.create({ model: 'test-model', input: `newer ${i}`, max_output_tokens: 2 }));
  const unknownBefore = await affinity(gw.adminUrl, 'unknown');
  const pinnedBefore = await affinity(gw.adminUrl, 'pinned');
  const r = await post(gw.url, JSON.stringify({ model: 'test-model', input: 'and?', previous_response_id: first.id, max_output_tokens: 2 }));
  t.ok(r.status === 200 || r.status === 404, `answered by whichever server the policy chose (${r.status})`);
  t.equal((await affinity(gw.adminUrl, 'unknown')) - unknownBefore, 1, 'the oldest id is forgotten');
  const last = await client.responses.create({ model: 'test-model', input: 'and?', previous_response_id: kept[3].id, max_output_tokens: 2 });
  t.ok(last.id);
  t.equal((await affinity(gw.adminUrl, 'pinned')) - pinnedBefore, 1, 'the newest is still pinned');
  t.equal(metric(await scrape(gw.adminUrl), 'infergate_response_affinity_entries'), 4, 'infergate_response_affinity_entries: the map full at max_entries 4');
});

t.test('a pinned server removed by a reload: the next turn is routed normally and gets not-found', async (t) => {
  const { url, adminUrl, file, proc, stop } = await startGateway(gatewayConfig(mocks.endpoints));
  t.teardown(stop);
  const sdk = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const { data: first, response } = await sdk.responses.create({ model: 'test-model', input: 'remember me', max_output_tokens: 2 }).withResponse();
  const pinned = response.headers.get('x-infergate-endpoint')!;
  writeFileSync(file, stringify(gatewayConfig(mocks.endpoints.filter((e) => e !== pinned))));
  proc.child.kill('SIGHUP');
  await until(async () => metric(await scrape(adminUrl), 'infergate_config_reloads_total', { result: 'success' }) >= 1, 20_000, 'the reload');
  await until(async () => {
    const r = await request(`${adminUrl}/debug/pools`);
    return !JSON.stringify(await r.body.json()).includes(pinned);
  }, 10_000, 'the pinned server out of the pool');
  const r = await post(url, JSON.stringify({ model: 'test-model', input: 'me again', previous_response_id: first.id }));
  t.equal(r.status, 404, "another server's not-found");
  t.not(r.headers['x-infergate-endpoint'], pinned);
  t.match(JSON.parse(r.text), { error: { type: 'invalid_request_error', param: 'response_id', code: 404 } });
  t.equal(await affinity(adminUrl, 'gone'), 1, 'counted as gone');
  const fresh = await sdk.responses.create({ model: 'test-model', input: 'a new start', max_output_tokens: 2 });
  t.ok(fresh.id, 'the gateway serves on');
});

t.test('the TTL: a remembered id stops pinning once it is older than response_affinity.ttl', async (t) => {
  const short = await startGateway(gatewayConfig(mocks.endpoints, { over: { response_affinity: { max_entries: 100, ttl: '300ms' } } }));
  t.teardown(() => short.stop());
  const sdk = new OpenAI({ baseURL: `${short.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const first = await sdk.responses.create({ model: 'test-model', input: 'soon forgotten', max_output_tokens: 2 });
  const followUp = () => post(short.url, JSON.stringify({ model: 'test-model', input: 'again', previous_response_id: first.id, max_output_tokens: 2 }));
  t.equal((await followUp()).status, 200, 'pinned while young');
  t.equal(await affinity(short.adminUrl, 'pinned'), 1);
  // each follow-up of the same id is pinned until the TTL has passed, then routed as any request
  await until(async () => {
    await followUp();
    return (await affinity(short.adminUrl, 'unknown')) === 1;
  }, 10_000, 'the id to expire');
  t.pass('expired: routed normally');
});

t.test('the pinned server fails: its failure is answered, not a retry elsewhere that could only say not-found', async (t) => {
  const own = await startGateway(gatewayConfig(mocks.endpoints));
  t.teardown(() => own.stop());
  const sdk = new OpenAI({ baseURL: `${own.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const { data: first, response } = await sdk.responses.create({ model: 'test-model', input: 'remember me', max_output_tokens: 2 }).withResponse();
  const pinned = response.headers.get('x-infergate-endpoint')!;
  const faults = (body: unknown) => request(`http://${pinned}/mock/faults`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.body.dump());
  await faults({ fail_rate: 1, fail_mode: 'refuse' });
  t.teardown(() => faults({ fail_rate: 0 }));
  const r = await post(own.url, JSON.stringify({ model: 'test-model', input: 'me again', previous_response_id: first.id }));
  t.equal(r.status, 502, 'the pinned server refused: 502, not another server\'s 404');
  t.equal(r.headers['x-infergate-endpoint'], pinned);
  t.match(JSON.parse(r.text), { error: { code: 'upstream_unavailable' } });
  t.equal(metric(await scrape(own.adminUrl), 'infergate_retries_total', { pool: 'p' }), 0, 'no retry on another server');
  await faults({ fail_rate: 0 });
  const again = await post(own.url, JSON.stringify({ model: 'test-model', input: 'me again', previous_response_id: first.id, max_output_tokens: 2 }));
  t.equal(again.status, 200, 'served again once the server is back');
});

/** The id read from an answer relayed in these chunks, as the exchange reads it (AnswerUsage with the watch). */
function idOf(chunks: Buffer[], sse: boolean): string | undefined {
  const watch = new ResponseIdWatch();
  const usage = new AnswerUsage(sse ? 'none' : 'client', sse, watch);
  const out: Buffer[] = [];
  for (const c of chunks) out.push(usage.data(c));
  out.push(usage.end());
  if (Buffer.compare(Buffer.concat(out), Buffer.concat(chunks)) !== 0) throw new Error('the bytes relayed changed');
  return watch.id;
}

t.test('the id: a JSON answer and a stream, cut at every byte', async (t) => {
  const json = Buffer.from('{"object":"response","output":[{"id":"msg_1","content":[{"text":"a \\"}\\" {"}]}],"id":"resp_abc","usage":{}}');
  const sse = Buffer.from(
    'event: response.created\ndata: {"type":"response.created","sequence_number":0,"item":{"id":"no"},"response":{"object":"response","output":[],"id":"resp_s1"}}\n\n' +
      'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_other"}}\n\n',
  );
  for (const [what, bytes, sseMode, want] of [
    ['json', json, false, 'resp_abc'],
    ['sse', sse, true, 'resp_s1'],
  ] as const) {
    for (let cut = 0; cut <= bytes.length; cut++) {
      const id = idOf([bytes.subarray(0, cut), bytes.subarray(cut)], sseMode);
      if (id !== want) {
        t.fail(`${what} cut at ${cut}: ${id}`);
        return;
      }
    }
    t.pass(`${what}: ${want} wherever the answer is cut, the bytes relayed unchanged`);
  }
  t.equal(idOf([Buffer.from('{"output":[{"id":"msg_1"}],"meta":{"id":"x"}}')], false), undefined, 'only the top-level id counts');
  t.equal(idOf([Buffer.from('{"a":' + '['.repeat(100_000) + ']'.repeat(100_000) + ',"id":"resp_late"}')], false), 'resp_late', 'deep nesting before the id: still read');
  t.equal(idOf([Buffer.from('{"id":"resp_\\u0041"}')], false), 'resp_A', 'an escape in the id: the id as a follow-up would send it');
  t.equal(idOf([Buffer.from('{"id":"resp_\\u0000"}')], false), undefined, 'an id no request could name is not taken');
  t.equal(idOf([Buffer.from('{"id":42}')], false), undefined, 'an id that is not a string is not taken');
  t.equal(idOf([Buffer.from('event: x\ndata: {"response":{"id":"resp_\\u00e9"}}\n\ndata: {"response":{"id":"resp_ok"}}\n\n')], true), 'resp_ok', 'a stream: the first event with an id a request could name');
});

t.test('the id past the size the usage reader keeps (1 MiB)', async (t) => {
  const big = Buffer.from(`{"id":"resp_big","output":"${'x'.repeat(1_100_000)}"}`);
  t.equal(idOf([big.subarray(0, 1000), big.subarray(1000)], false), undefined, 'a JSON answer over 1 MiB is not read: its follow-ups are routed as unknown ids');
  const first = Buffer.from('data: {"type":"response.created","response":{"id":"resp_long"}}\n\n');
  const deltas = Buffer.from(`data: {"type":"response.output_text.delta","delta":"${'y'.repeat(1000)}"}\n\n`.repeat(2_000));
  t.equal(idOf([first, deltas], true), 'resp_long', 'a stream of 2 MB: its first event gives the id');
  t.equal(idOf([deltas, first], true), undefined, 'an id first seen past the first 1 MiB of a stream is not looked for');
});

t.test('the map and the cluster share: its own answers told on, those from replicas kept and not told on', async (t) => {
  const map = new ResponseAffinity({ max_entries: 8, ttl: 60_000 });
  const told: string[] = [];
  map.onRemember = (id) => told.push(id);
  const served = { pool: 'p', endpoint: 'a:1', model: 'm', target: 'm', tenant: 'acme' };
  map.remember('resp_own', served);
  map.rememberRemote('resp_remote', { ...served, endpoint: 'b:1' });
  t.same(told, ['resp_own'], 'only what this process relayed goes to the others');
  t.same(map.lookup('resp_remote'), { ...served, endpoint: 'b:1' }, "a replica's answer is routed as one relayed here");
  t.throws(() => map.rememberRemote('bad id', served), /printable ASCII/, 'what is not an id is refused (counted invalid by the share)');
  t.equal(map.lookup('bad id'), undefined);
  const off = new ResponseAffinity({ max_entries: 0, ttl: 60_000 });
  off.onRemember = (id) => told.push(id);
  off.remember('resp_x', served);
  off.rememberRemote('resp_y', served);
  t.equal(told.length, 1, 'with the map off nothing is remembered or told');
  t.equal(off.lookup('resp_y'), undefined);
});
