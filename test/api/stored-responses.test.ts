/**
 * Calls on a stored Responses API answer through a real gateway (dist/cli.js) in front of three real mock
 * servers, each holding only the answers it made (as vLLM does in memory): `GET /v1/responses/{id}`
 * (retrieve, whole or replayed as a stream with the query passed on) and `POST /v1/responses/{id}/cancel`
 * reach the server that stored the answer (x-infergate-endpoint; the two others would say 404); an id the
 * gateway did not relay is answered 404 by the gateway without any server asked; a malformed id 400; no
 * token 401, another tenant's answer 404; the storing server refusing connections 502, no other server
 * asked. Clients: the openai SDK and undici.
 */
import t from 'tap';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { request } from 'undici';
import { stringify } from 'yaml';
import OpenAI from 'openai';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { gatewayConfig, metric, scrape, startGateway, startMocks, until } from '../e2e/support.js';
import { tempDir } from '../helpers/process.js';

// decode-ms 5000: a background answer of 20 tokens would take 100 s, so it is still running when cancelled
const mocks = await startMocks(3, ['--model', 'test-model', '--decode-ms', '5000']);
t.teardown(() => mocks.kill());
const gw = await startGateway(gatewayConfig(mocks.endpoints));
t.teardown(() => gw.stop());
const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });

async function call(url: string, method: 'GET' | 'POST' | 'DELETE', headers: Record<string, string> = {}) {
  const r = await request(url, { method, headers });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text, json: () => JSON.parse(text) as Record<string, any> };
}

/**
 * The requests each mock has seen, per endpoint (GET /mock/requests: the last 64, each with its
 * x-request-id): a request that reaches a mock changes its list, even once the list is full.
 */
async function seen(): Promise<string[]> {
  const out: string[] = [];
  for (const ep of mocks.endpoints) {
    const r = await request(`http://${ep}/mock/requests`);
    out.push(JSON.stringify(((await r.body.json()) as { requests: unknown[] }).requests));
  }
  return out;
}

async function stored(op: string, outcome: string, url = gw.adminUrl): Promise<number> {
  return metric(await scrape(url), 'infergate_stored_response_requests_total', { op, outcome });
}

/** A stored answer made through the gateway: its id and the server that stored it. */
async function made(input: string, extra: Record<string, unknown> = {}, base = gw.url, headers: Record<string, string> = {}) {
  const r = await request(`${base}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'test-model', input, max_output_tokens: 6, ...extra }),
  });
  const body = (await r.body.json()) as Record<string, any>;
  if (r.statusCode !== 200) throw new Error(`made: ${r.statusCode} ${JSON.stringify(body)}`);
  return { id: body.id as string, endpoint: r.headers['x-infergate-endpoint'] as string, body };
}

t.test('retrieve: each answer is fetched from the one server of three that stored it', async (t) => {
  const answers = [];
  for (let i = 0; i < 3; i++) answers.push(await made(`answer number ${i}`));
  t.equal(new Set(answers.map((a) => a.endpoint)).size, 3, 'round_robin spread them over the three servers');
  const before = await stored('retrieve', 'pinned');
  for (const a of answers) {
    const r = await call(`${gw.url}/v1/responses/${a.id}`, 'GET');
    t.equal(r.status, 200, `retrieve ${a.id}`);
    t.equal(r.headers['x-infergate-endpoint'], a.endpoint, `${a.id} from the server that stored it`);
    t.same(r.json(), a.body, 'the stored answer as it was made');
    const other = mocks.endpoints.find((e) => e !== a.endpoint)!;
    t.equal((await call(`http://${other}/v1/responses/${a.id}`, 'GET')).status, 404, 'another server would not know it');
    const sdk = await client.responses.retrieve(a.id);
    t.equal(sdk.id, a.id, 'the openai SDK retrieves it');
    t.equal(sdk.output_text, a.body.output[0].content[0].text);
  }
  t.equal((await stored('retrieve', 'pinned')) - before, 6, 'counted as pinned');
  const requests = metric(await scrape(gw.adminUrl), 'infergate_requests_total', { model: 'test-model', pool: 'p', code: '200' });
  t.ok(requests >= 9, `infergate_requests_total counts them under the answer's model and pool (${requests})`);
});

t.test('retrieve with ?stream=true: the query goes on, the events come back as a stream', async (t) => {
  const a = await made('a streamed replay', { max_output_tokens: 5 });
  const r = await call(`${gw.url}/v1/responses/${a.id}?stream=true&starting_after=2`, 'GET');
  t.equal(r.status, 200);
  t.match(r.headers['content-type'], /^text\/event-stream/);
  t.equal(r.headers['x-infergate-endpoint'], a.endpoint);
  const events = [...r.text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]) as { type: string; sequence_number: number; response?: { id: string } });
  t.equal(events[0].sequence_number, 3, 'starting_after reached the server');
  t.equal(events.at(-1)!.type, 'response.incomplete');
  t.equal(events.at(-1)!.response!.id, a.id);
});

t.test('cancel: a running background answer is cancelled on its server; a finished one gets that server\'s 400', async (t) => {
  const bg = await made('a long background job', { background: true, max_output_tokens: 20 });
  t.equal(bg.body.status, 'queued');
  const before = await stored('cancel', 'pinned');
  const r = await call(`${gw.url}/v1/responses/${bg.id}/cancel`, 'POST');
  t.equal(r.status, 200, 'cancelled');
  t.equal(r.headers['x-infergate-endpoint'], bg.endpoint);
  t.match(r.json(), { id: bg.id, status: 'cancelled' });
  t.equal((await client.responses.retrieve(bg.id)).status, 'cancelled', 'a retrieve sees it cancelled');
  const again = await client.responses.cancel(bg.id).catch((e: unknown) => e);
  t.ok(again instanceof OpenAI.BadRequestError, `a second cancel: the server's 400 (${String(again)})`);

  const done = await made('a finished answer');
  const late = await call(`${gw.url}/v1/responses/${done.id}/cancel`, 'POST', { 'content-type': 'application/json' });
  t.equal(late.status, 400, "the storing server's answer, not another's 404");
  t.equal(late.headers['x-infergate-endpoint'], done.endpoint);
  t.same(late.json(), { error: { message: 'Cannot cancel a synchronous response.', type: 'invalid_request_error', param: null, code: 400 } });
  t.equal((await stored('cancel', 'pinned')) - before, 3);
});

t.test('an id the gateway did not relay: 404 from the gateway, no server asked', async (t) => {
  const direct = mocks.endpoints[0];
  // made on a server directly: that server holds it, but the gateway cannot know which
  const r0 = await request(`http://${direct}/v1/responses`, { method: 'POST', body: JSON.stringify({ model: 'test-model', input: 'behind its back' }) });
  const id = ((await r0.body.json()) as { id: string }).id;
  const before = await seen();
  const unknownBefore = await stored('retrieve', 'unknown');
  for (const [what, url, method] of [
    ['retrieve', `${gw.url}/v1/responses/${id}`, 'GET'],
    ['retrieve, never made', `${gw.url}/v1/responses/resp_never_made`, 'GET'],
    ['cancel', `${gw.url}/v1/responses/${id}/cancel`, 'POST'],
  ] as const) {
    const r = await call(url, method);
    t.equal(r.status, 404, what);
    const e = r.json().error;
    t.match(e, { type: 'invalid_request_error', code: 'not_found', param: 'response_id' }, what);
    t.match(e.message, /is known to this gateway: it did not relay that response .* or has forgotten it/, `${what}: says why`);
    t.notOk(r.headers['x-infergate-endpoint'], 'no endpoint named');
  }
  const err = await client.responses.retrieve('resp_never_made').catch((e: unknown) => e);
  t.ok(err instanceof OpenAI.NotFoundError, 'the SDK sees NotFoundError');
  t.same(await seen(), before, 'no server was asked');
  t.equal((await stored('retrieve', 'unknown')) - unknownBefore, 3);

  const off = await startGateway(gatewayConfig(mocks.endpoints, { over: { response_affinity: { max_entries: 0 } } }));
  t.teardown(() => off.stop());
  const a = await made('not remembered', {}, off.url);
  const r = await call(`${off.url}/v1/responses/${a.id}`, 'GET');
  t.equal(r.status, 404, 'response_affinity off: every retrieve is the 404');
  t.match(r.json().error.message, /does not remember relayed responses \(response_affinity.max_entries is 0\)/);
});

t.test('a malformed id: 400 from the gateway, no server asked; DELETE is no route', async (t) => {
  const before = await seen();
  const cases: Array<[string, string]> = [
    ['too long', 'resp_' + 'x'.repeat(300)],
    ['a broken escape', 'resp_%zz'],
    ['bytes that are not UTF-8', 'resp_%ff%fe'],
    ['a NUL', 'resp_%00'],
    ['a space', 'resp_%20x'],
    ['non-ASCII', 'resp_caf%C3%A9'],
    ['an encoded slash', 'resp_a%2Fb'],
  ];
  for (const [what, id] of cases) {
    for (const [url, method] of [[`${gw.url}/v1/responses/${id}`, 'GET'], [`${gw.url}/v1/responses/${id}/cancel`, 'POST']] as const) {
      const r = await call(url, method);
      t.equal(r.status, 400, `${what} (${method})`);
      t.match(r.json().error, { type: 'invalid_request_error', code: 'invalid_field', param: 'response_id' });
      t.ok(r.text.length < 400, `${what}: the answer does not echo the id`);
    }
  }
  const del = await call(`${gw.url}/v1/responses/resp_x`, 'DELETE');
  t.equal(del.status, 404, 'DELETE: not a route (vLLM has none)');
  t.match(del.json().error, { code: 'not_found' });
  const wrong = await call(`${gw.url}/v1/responses/resp_x/cancel`, 'GET');
  t.equal(wrong.status, 405, 'GET on a cancel path: 405');
  t.equal(wrong.headers.allow, 'POST, OPTIONS');
  const options = await request(`${gw.url}/v1/responses/resp_x`, { method: 'OPTIONS' });
  await options.body.dump();
  t.equal(options.statusCode, 204, 'OPTIONS on a retrieve path');
  t.equal(options.headers.allow, 'GET, OPTIONS');
  const nested = await call(`${gw.url}/v1/responses/resp_x/other`, 'GET');
  t.equal(nested.status, 404, 'a deeper path is no route');
  t.same(await seen(), before, 'no server was asked');
});

t.test('the storing server refuses connections: 502 as for a pinned follow-up, no other server asked', async (t) => {
  const own = await startGateway(gatewayConfig(mocks.endpoints));
  t.teardown(() => own.stop());
  const a = await made('remember me', {}, own.url);
  const faults = (body: unknown) => request(`http://${a.endpoint}/mock/faults`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.body.dump());
  await faults({ fail_rate: 1, fail_mode: 'refuse' });
  t.teardown(() => faults({ fail_rate: 0 }));
  const others = mocks.endpoints.map((e, i) => [e, i] as const).filter(([e]) => e !== a.endpoint).map(([, i]) => i);
  const before = await seen();
  for (const [url, method] of [[`${own.url}/v1/responses/${a.id}`, 'GET'], [`${own.url}/v1/responses/${a.id}/cancel`, 'POST']] as const) {
    const r = await call(url, method);
    t.equal(r.status, 502, `${method}: the storing server's failure`);
    t.equal(r.headers['x-infergate-endpoint'], a.endpoint);
    t.match(r.json(), { error: { code: 'upstream_unavailable', type: 'server_error' } });
  }
  const after = await seen();
  for (const i of others) t.equal(after[i], before[i], `${mocks.endpoints[i]} was not asked`);
  t.equal(metric(await scrape(own.adminUrl), 'infergate_retries_total', { pool: 'p' }), 0, 'no retry');
  await faults({ fail_rate: 0 });
  const back = await call(`${own.url}/v1/responses/${a.id}`, 'GET');
  t.equal(back.status, 200, 'retrieved once the server is back');
});

t.test('with JWT auth: no token 401 like every /v1 route; only the tenant that made an answer reaches it', async (t) => {
  const ISS = 'https://issuer.test';
  const keys = await generateKeyPair('ES256', { extractable: true });
  const dir = tempDir();
  writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [{ ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] }));
  const token = (sub: string) =>
    new SignJWT({ sub, models: '*' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(ISS).setAudience('infergate').setIssuedAt().setExpirationTime('1h').sign(keys.privateKey);
  const jwtGw = await startGateway({
    ...gatewayConfig(mocks.endpoints),
    auth: { mode: 'jwt', jwt: { jwks_file: join(dir, 'jwks.json'), issuer: ISS, audience: 'infergate', algorithms: ['ES256'] } },
  });
  t.teardown(() => jwtGw.stop());
  const alice = { authorization: `Bearer ${await token('alice')}` };
  const bob = { authorization: `Bearer ${await token('bob')}` };
  const a = await made('alice asks', {}, jwtGw.url, alice);
  const before = await seen();
  for (const [url, method] of [[`${jwtGw.url}/v1/responses/${a.id}`, 'GET'], [`${jwtGw.url}/v1/responses/${a.id}/cancel`, 'POST']] as const) {
    const none = await call(url, method);
    t.equal(none.status, 401, `${method} without a token`);
    t.match(none.json().error, { code: 'missing_token' });
    const bad = await call(url, method, { authorization: 'Bearer not-a-token' });
    t.equal(bad.status, 401, `${method} with a bad token`);
    const other = await call(url, method, bob);
    t.equal(other.status, 404, `${method} by another tenant: as an unknown id`);
  }
  const unknown = await call(`${jwtGw.url}/v1/responses/resp_never_made`, 'GET');
  t.equal(unknown.status, 401, 'an unknown id without a token: 401 too (nothing learned of which ids exist)');
  t.same(await seen(), before, 'no server was asked');
  // a follow-up naming alice's answer: bob gets the not-found an unknown id would get, and no server is asked
  const follow = (headers: Record<string, string>) =>
    request(`${jwtGw.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'test-model', input: 'and then?', max_output_tokens: 4, previous_response_id: a.id }),
    });
  const beforeFollow = await seen();
  const bobs = await follow(bob);
  t.equal(bobs.statusCode, 404, "a follow-up of another tenant's answer");
  t.match(((await bobs.body.json()) as Record<string, any>).error, { type: 'invalid_request_error', code: 'not_found', param: 'previous_response_id' });
  t.same(await seen(), beforeFollow, 'no server was asked');
  t.equal(metric(await scrape(jwtGw.adminUrl), 'infergate_response_affinity_total', { outcome: 'other_tenant' }), 1);
  // a token not seen before: its verification is still running when the body has come (the tenant is
  // known only after it)
  const alices = await follow({ authorization: `Bearer ${await token('alice')}` });
  t.equal(alices.statusCode, 200, 'its own tenant continues it');
  t.equal(alices.headers['x-infergate-endpoint'], a.endpoint, 'on the server that stored it');
  await alices.body.dump();
  const own = await call(`${jwtGw.url}/v1/responses/${a.id}`, 'GET', alice);
  t.equal(own.status, 200, 'its own tenant retrieves it');
  t.equal(own.headers['x-infergate-endpoint'], a.endpoint);
});

t.test('the storing server removed by a reload: 502 without asking any server', async (t) => {
  const { url, adminUrl, file, proc, stop } = await startGateway(gatewayConfig(mocks.endpoints));
  t.teardown(stop);
  const a = await made('soon orphaned', {}, url);
  writeFileSync(file, stringify(gatewayConfig(mocks.endpoints.filter((e) => e !== a.endpoint))));
  proc.child.kill('SIGHUP');
  await until(async () => metric(await scrape(adminUrl), 'infergate_config_reloads_total', { result: 'success' }) >= 1, 20_000, 'the reload');
  await until(async () => {
    const r = await request(`${adminUrl}/debug/pools`);
    return !JSON.stringify(await r.body.json()).includes(a.endpoint);
  }, 10_000, 'the storing server out of the pool');
  const before = await seen();
  const r = await call(`${url}/v1/responses/${a.id}`, 'GET');
  t.equal(r.status, 502);
  t.match(r.json(), { error: { code: 'upstream_unavailable' } });
  t.same(await seen(), before, 'no server asked (another could only say not-found)');
  t.equal(await stored('retrieve', 'gone', adminUrl), 1, 'counted as gone');
});
