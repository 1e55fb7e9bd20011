// Mixed traffic against failing model servers: streams and whole answers, completions, an alias, client
// aborts at random moments and bad input, in front of mocks that refuse, answer 500 or die mid-answer.
// What a user must see: every request ends (no hang), every answer is whole or an error (never a silent
// truncation), nothing leaks (in-flight work back to zero on the gateway and on every mock), and the
// gateway is still up.
import t from 'tap';
import { Agent, request } from 'undici';
import { startMocks, startGateway, gatewayConfig, until } from './support.js';

const CLIENTS = 16;
const RUN_MS = 6_000;

const mocks = await startMocks(3, ['--model', 'test-model', '--time-scale', '20', '--fail-rate', '0.1', '--max-num-seqs', '16', '--seed', '7']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, {
    pool: { policy: 'scored', saturation: { queue_depth: 1000, kv_cache: 1 } },
    over: { limits: { max_body_bytes: '64kb', request_timeout: '20s', first_byte_timeout: '5s' } },
  }),
);
const agent = new Agent({ connections: CLIENTS * 2, keepAliveTimeout: 2_000 });
t.teardown(async () => {
  await agent.close();
  await gw.stop();
  await mocks.kill();
});

type Kind = 'stream' | 'whole' | 'completions' | 'alias' | 'abort' | 'bad';
const KINDS: Kind[] = ['stream', 'stream', 'whole', 'completions', 'alias', 'abort', 'abort', 'bad'];

const seen = new Map<string, number>();
const problems: string[] = [];
const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);

async function one(i: number): Promise<void> {
  const kind = KINDS[i % KINDS.length];
  const content = `conversation ${i % 5}: ` + 'tell me about routing '.repeat(3 + (i % 20));
  let path = '/v1/chat/completions';
  let body: string;
  if (kind === 'completions') {
    path = '/v1/completions';
    body = JSON.stringify({ model: 'test-model', prompt: content, max_tokens: 12, stream: true });
  } else if (kind === 'bad') {
    const bad = [
      '{"model": "test-model", "messages": [',
      JSON.stringify({ model: 'nope', messages: [{ role: 'user', content }] }),
      JSON.stringify({ model: 'test-model', messages: 'x' }),
      JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'x'.repeat(70_000) }] }),
    ];
    body = bad[Math.floor(i / KINDS.length) % bad.length];
  } else {
    body = JSON.stringify({ model: kind === 'alias' ? 'alias' : 'test-model', messages: [{ role: 'user', content }], max_tokens: 8 + (i % 24), stream: kind !== 'whole' });
  }
  const ac = new AbortController();
  const abortAfter = kind === 'abort' ? (i * 37) % 120 : -1;
  const abortTimer = abortAfter >= 0 ? setTimeout(() => ac.abort(), abortAfter) : undefined;
  const hang = setTimeout(() => {
    problems.push(`request ${i} (${kind}) did not end within 15 s`);
    ac.abort();
  }, 15_000);
  try {
    const res = await request(`${gw.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent, signal: ac.signal });
    const text = await res.body.text();
    const status = res.statusCode;
    if (kind === 'bad') {
      if (status < 400 || status >= 500) problems.push(`bad input ${i} answered ${status}`);
    } else if (status === 200 && kind !== 'whole') {
      if (!text.endsWith('data: [DONE]\n\n') && !/\ndata: \{"error":/.test(`\n${text}`)) problems.push(`stream ${i} truncated: …${text.slice(-80)}`);
    } else if (status === 200) {
      try {
        JSON.parse(text);
      } catch {
        problems.push(`whole answer ${i} is not complete JSON`);
      }
    } else if (!/"error"/.test(text)) {
      problems.push(`status ${status} without an error body (${kind} ${i})`);
    }
    count(`${kind} ${status}`);
  } catch (e) {
    if (ac.signal.aborted && abortAfter >= 0) count(`${kind} aborted by the client`);
    else problems.push(`request ${i} (${kind}) failed: ${(e as { code?: string }).code ?? (e as Error).message}`);
  } finally {
    clearTimeout(abortTimer);
    clearTimeout(hang);
  }
}

t.test('mixed traffic, aborts and bad input against failing servers: all ends, nothing leaks', async (t) => {
  // At least RUN_MS and at least MIN_REQUESTS, however loaded the machine (a count, not a speed, is what the
  // test needs); a hard deadline keeps a wedged gateway from holding the run forever.
  const MIN_REQUESTS = 200;
  let next = 0;
  const end = Date.now() + RUN_MS;
  const hardEnd = Date.now() + 10 * RUN_MS;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while ((Date.now() < end || next < MIN_REQUESTS) && Date.now() < hardEnd) await one(next++);
    }),
  );
  t.ok(next >= MIN_REQUESTS, `${next} requests sent`);
  t.same(problems, [], 'every request ended, whole or with an error');
  t.ok([...seen.keys()].some((k) => k.endsWith(' 200')), 'answers were served');
  t.ok([...seen.keys()].some((k) => k.includes('aborted by the client')), 'clients aborted some');
  t.ok([...seen.keys()].some((k) => / 5\d\d$/.test(k)), 'failures were injected and reported');
  t.comment(JSON.stringify(Object.fromEntries([...seen].sort())));

  // Nothing left running: the gateway's in-flight count and every mock's queue drain to zero.
  await until(async () => {
    const pools = (await (await request(`${gw.adminUrl}/debug/pools`)).body.json()) as Record<string, { endpoints: Array<{ in_flight: number }> }>;
    return Object.values(pools).every((p) => p.endpoints.every((e) => e.in_flight === 0));
  }, 10_000, 'the gateway to have no request in flight');
  await until(async () => {
    const states = await Promise.all(mocks.endpoints.map(async (ep) => (await (await request(`http://${ep}/mock/state`)).body.json()) as { running: number; waiting: number }));
    return states.every((s) => s.running === 0 && s.waiting === 0);
  }, 10_000, 'every mock to have no request left (aborts reached them)');
  t.pass('no request left in flight on the gateway or on any model server');
  t.equal((await request(`${gw.adminUrl}/healthz`)).statusCode, 200, 'the gateway is still up');
});
