// Two gateway processes sharing routing knowledge through a real redis-server (cluster.backend: redis),
// in front of the same real mock vLLM servers: a conversation whose turns alternate between the gateways
// keeps landing on the endpoint that holds its prefix (that mock's prefix-cache hits rise), a stored Responses
// API answer made through one is retrieved through the other; with Redis
// killed both keep serving and say they are on their own (gauge, log line); with Redis back, sharing resumes.
import t from 'tap';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startRedis } from '../helpers/redis.js';
import { startGateway, gatewayConfig, until, type RunningGateway } from '../helpers/process.js';
import { startMocks, chat, longText, scrape, metric, mockMetric } from '../e2e/support.js';

const redis = await startRedis();
t.teardown(() => redis.stop());
const mocks = await startMocks(3, ['--model', 'test-model', '--time-scale', '20', '--seed', '3']);
t.teardown(() => mocks.kill());
const config = gatewayConfig(mocks.endpoints, {
  pool: { policy: 'scored' },
  over: { cluster: { backend: 'redis', url: redis.url, channel: 'test:routing' }, logging: { level: 'info', access_log: false } },
});
const a = await startGateway(config);
t.teardown(() => a.stop());
const b = await startGateway(config);
t.teardown(() => b.stop());

const gauge = async (gw: RunningGateway) => metric(await scrape(gw.adminUrl), 'infergate_cluster_connected');
const messages = async (gw: RunningGateway, direction: string, result: string) =>
  metric(await scrape(gw.adminUrl), 'infergate_cluster_messages_total', { direction, result });

type Msg = { role: string; content: string };
/** One turn of a conversation through `gw`: the reply is appended to `history`; returns the serving endpoint. */
async function turn(gw: RunningGateway, history: Msg[], question: string): Promise<string> {
  history.push({ role: 'user', content: question });
  const r = await chat(gw.url, { model: 'test-model', max_tokens: 8, messages: history });
  if (r.status !== 200) throw new Error(`${gw.url}: status ${r.status}: ${JSON.stringify(r.body)}`);
  const reply = (JSON.parse(r.body) as { choices: Array<{ message: { content: string } }> }).choices[0].message.content;
  history.push({ role: 'assistant', content: reply });
  return r.endpoint!;
}

function conversation(seed: string): Msg[] {
  return [{ role: 'system', content: longText(seed, 4000) }];
}

t.test('both gateways connect to Redis', async () => {
  await until(async () => (await gauge(a)) === 1 && (await gauge(b)) === 1, 15_000, 'infergate_cluster_connected 1 on both');
});

t.test('a conversation alternating between the gateways stays on its endpoint', async (t) => {
  const convs = Array.from({ length: 6 }, (_, i) => conversation(`alternate-${i}`));
  const homes: string[] = [];
  for (const c of convs) homes.push(await turn(a, c, 'First question: what is this about?'));
  t.ok(new Set(homes).size >= 2, `six prefixes spread over ${new Set(homes).size} endpoints through A`);
  // B has heard of all six (each is one learned pick; B received none of their requests)
  await until(async () => (await messages(b, 'received', 'ok')) >= 6, 10_000, 'B received the six picks A learned');
  const hitsBefore = await Promise.all(mocks.endpoints.map((e) => mockMetric(e, 'vllm:prefix_cache_hits_total')));
  for (let i = 0; i < convs.length; i++) {
    t.equal(await turn(b, convs[i], 'Second question, through the other gateway.'), homes[i], `conversation ${i}, turn 2 through B: ${homes[i]}`);
  }
  const hitsAfter = await Promise.all(mocks.endpoints.map((e) => mockMetric(e, 'vllm:prefix_cache_hits_total')));
  const gained = hitsAfter.reduce((s, h, i) => s + h - hitsBefore[i], 0);
  t.ok(gained >= 6 * 500, `B's turns found their prefixes cached (${gained} tokens of prefix-cache hits)`);
  for (let i = 0; i < convs.length; i++) {
    t.equal(await turn(a, convs[i], 'Third question, back through the first gateway.'), homes[i], `conversation ${i}, turn 3 through A`);
  }
});

t.test('a stored Responses API answer made through one gateway is retrieved through the other', async (t) => {
  const before = await messages(b, 'received', 'ok');
  const made = await request(`${a.url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test-model', input: 'kept by one server', max_output_tokens: 4 }),
  });
  const body = (await made.body.json()) as { id: string };
  t.equal(made.statusCode, 200);
  const home = String(made.headers['x-infergate-endpoint']);
  // all that A sent (the pick and the answer go in two batches of the turn) has reached B
  await until(async () => (await messages(b, 'received', 'ok')) > before && (await messages(b, 'received', 'ok')) === (await messages(a, 'sent', 'ok')), 10_000, 'B heard of the answer');
  const got = await request(`${b.url}/v1/responses/${body.id}`);
  t.equal(got.statusCode, 200, 'retrieved through B');
  t.equal(got.headers['x-infergate-endpoint'], home, 'from the server that stored it');
  t.equal(((await got.body.json()) as { id: string }).id, body.id);
  const unknown = await request(`${b.url}/v1/responses/resp_never_made_here`);
  t.equal(unknown.statusCode, 404, 'an id neither gateway relayed: still 404');
  await unknown.body.dump();
});

t.test('whatever else is published on the channel is counted invalid and changes nothing', async (t) => {
  const intruder = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  t.teardown(() => intruder.disconnect());
  const before = await messages(b, 'received', 'invalid');
  const c = conversation('intruded');
  const home = await turn(a, c, 'A question before the noise.');
  // garbage, a truncated header, a foreign version, and a huge claimed record count
  await intruder.publish('test:routing', Buffer.from('{"pool":"p","endpoint":"x"}'));
  await intruder.publish('test:routing', Buffer.from([0x49, 1, 0, 0]));
  await intruder.publish('test:routing', Buffer.from([0x49, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
  await intruder.publish('test:routing', Buffer.from([0x49, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]));
  await until(async () => (await messages(b, 'received', 'invalid')) >= before + 4, 10_000, 'B counted the four invalid messages');
  t.equal(await turn(b, c, 'And a follow-up through B.'), home, 'B still routes the conversation to its endpoint');
});

t.test('Redis hanging (SIGSTOP): requests are answered, publishes time out and are counted', async (t) => {
  redis.pause();
  t.teardown(() => redis.resume());
  const before = await messages(a, 'sent', 'error');
  for (let i = 0; i < 3; i++) {
    const c = conversation(`hung-${i}`);
    const home = await turn(a, c, 'Asked while Redis hangs.');
    t.ok(mocks.endpoints.includes(home), `request ${i} answered by ${home} while Redis hangs`);
  }
  await until(async () => (await messages(a, 'sent', 'error')) > before, 10_000, 'the stuck publishes time out and count as errors');
  redis.resume();
});

t.test('Redis killed: both keep serving on their own knowledge, and say so', async (t) => {
  await redis.kill();
  await until(async () => (await gauge(a)) === 0 && (await gauge(b)) === 0, 15_000, 'infergate_cluster_connected 0 on both');
  for (const gw of [a, b]) {
    const c = conversation(`alone-${gw.url}`);
    const home = await turn(gw, c, 'Asked while Redis is away.');
    t.ok(mocks.endpoints.includes(home), `${gw.url} served while Redis is away (on ${home})`);
    t.equal(await turn(gw, c, 'And again.'), home, `its own knowledge still keeps the conversation on ${home}`);
    await until(() => /cluster: Redis unavailable/.test(gw.proc.stdout() + gw.proc.stderr()), 5_000, 'the Redis-away log line');
  }
  t.ok((await messages(a, 'sent', 'dropped')) >= 1, 'picks learned meanwhile are dropped, counted');
});

t.test('Redis back: sharing resumes', async (t) => {
  await redis.restart();
  await until(async () => (await gauge(a)) === 1 && (await gauge(b)) === 1, 20_000, 'infergate_cluster_connected 1 again on both');
  await until(() => /cluster: Redis answers again/.test(a.proc.stdout() + a.proc.stderr()), 5_000, 'the Redis-back log line');
  const before = await messages(b, 'received', 'ok');
  const c = conversation('after-restart');
  const home = await turn(a, c, 'Asked after Redis came back.');
  await until(async () => (await messages(b, 'received', 'ok')) > before, 10_000, 'B received what A learned after the restart');
  t.equal(await turn(b, c, 'Follow-up through B.'), home, `the follow-up through B lands on ${home}`);
});
