// Saturation on the prefill backlog (issue #16, setup C): model servers with vLLM's default 256 seats admit
// every request into their running batch, so their `waiting` count stays 0 and their KV use low while the
// prefill work ahead of a new request grows. Flooded with long prompts, the gateway answers 429 with
// Retry-After once every pod has more than saturation.max_prefill_backlog (the default, 1500ms) of prefill
// ahead at the speed it has shown; a short burst into the idle pods is still served whole. The queue and KV
// tests are set out of reach (queue_depth 1000, kv_cache 0.99: 60 requests of 2000 tokens fill 30% of the
// mocks' KV cache), so that every refusal here is the bound's, whatever the machine's speed; with the bound
// off the same flood is admitted whole.
import t from 'tap';
import type { Test } from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, countBy, debugPools, scrape, metric, until, type RunningGateway } from './support.js';

// prefill at 4000 tokens/s, five times faster than real time: 20 tokens per ms as the gateway sees it, so
// each 2000-token prompt below is about 100 ms of prefill and 30 of them on a pod are 3 s of work
const mocks = await startMocks(2, ['--model', 'test-model', '--prefill-tokens-per-s', '4000', '--time-scale', '5', '--seed', '21']);
t.teardown(async () => {
  await mocks.kill();
});

const SAT = { queue_depth: 1000, kv_cache: 0.99, retry_after: 'auto' };
const long = (tag: string, i: number) => ({
  model: 'test-model', stream: true, max_tokens: 4,
  // distinct from the first characters on: no prompt finds another's prefix in a cache
  messages: [{ role: 'user', content: `${tag} ${i}: ` + `the tide came in over the flat grey sand and went out again. `.repeat(130) }],
});
const short = (i: number) => ({ model: 'test-model', stream: true, max_tokens: 8, messages: [{ role: 'user', content: `short ${i}: hello` }] });

/** Every endpoint of pool p has fresh metrics showing nothing running or waiting, and nothing of ours in flight. */
async function idle(gw: RunningGateway): Promise<void> {
  await until(
    async () => (await debugPools(gw)).p.endpoints.every((e) => !e.stale && e.signals !== null && e.signals.running === 0 && e.signals.waiting === 0 && e.in_flight === 0),
    20_000,
    'every endpoint fresh and idle',
  );
}

/** One long prompt on each pod, at once (the second goes to the other pod), so each has shown its prefill speed. */
async function warm(t: Test, gw: RunningGateway): Promise<void> {
  const rs = await Promise.all([0, 1].map((i) => chat(gw.url, long('warm', i))));
  t.same(rs.map((r) => r.status), [200, 200], 'warm-up served');
  t.same(new Set(rs.map((r) => r.endpoint)).size, 2, 'one on each pod');
  // ttft_ms: our time to first byte on the pod (0 until one is seen); support.ts's type lists fewer fields
  const seen = async () => (await debugPools(gw)).p.endpoints.every((e) => (e as unknown as { ttft_ms: number }).ttft_ms > 0);
  await until(seen, 10_000, 'a first byte seen on each pod');
}

t.test('256-seat pods with slow prefill: a flood of long prompts gets 429 on the backlog, a short burst into idle pods is served', async (t) => {
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: SAT } }));
  t.teardown(() => gw.stop());
  await warm(t, gw);

  await idle(gw);
  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(gw.url, short(i))));
  t.same([...countBy(burst.map((r) => r.status))], [[200, 20]], 'a burst of 20 short requests into the idle pods: 20 × 200');
  t.equal(burst.filter((r) => r.complete).length, 20, 'every stream ended with data: [DONE]');

  await idle(gw);
  const flood = await Promise.all(Array.from({ length: 60 }, (_, i) => chat(gw.url, long('flood', i))));
  const statuses = countBy(flood.map((r) => r.status));
  t.comment(`flood: statuses ${JSON.stringify([...statuses])}`);
  t.same([...statuses.keys()].sort(), [200, 429], 'only 200 and 429 answers');
  const ok = flood.filter((r) => r.status === 200);
  const refused = flood.filter((r) => r.status === 429);
  t.ok(refused.length >= 10, `${refused.length} of 60 refused`);
  t.ok(ok.length >= 2, `${ok.length} of 60 admitted (at least the first on each pod)`);
  t.equal(ok.filter((r) => r.complete).length, ok.length, 'every admitted stream completed');
  let bad = 0;
  for (const r of refused) {
    const ra = r.headers.get('retry-after');
    const body = JSON.parse(r.body) as { error?: { code?: unknown; message?: unknown } };
    if (!(ra !== null && /^\d+$/.test(ra) && Number(ra) >= 1 && Number(ra) <= 60 && body.error?.code === 'pool_saturated' && typeof body.error.message === 'string')) bad++;
  }
  t.equal(bad, 0, 'every 429 carries an integer Retry-After (1-60 s) and an OpenAI error body with code pool_saturated');
  let served = 0;
  for (const ep of mocks.endpoints) served += metric(await scrape(`http://${ep}`), 'vllm:request_success_total');
  t.equal(served, 2 + 20 + ok.length, 'the pods finished exactly the admitted requests: a 429 never reached them');
  t.equal(metric(await scrape(gw.adminUrl), 'infergate_rejected_total', { reason: 'saturated' }), refused.length, 'counted as saturated');
});

t.test('the same flood with max_prefill_backlog 0s: admitted whole', async (t) => {
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: { ...SAT, max_prefill_backlog: '0s' } } }));
  t.teardown(() => gw.stop());
  await warm(t, gw);
  await idle(gw);
  const flood = await Promise.all(Array.from({ length: 60 }, (_, i) => chat(gw.url, long('again', i))));
  t.same([...countBy(flood.map((r) => r.status))], [[200, 60]], '60 × 200: without the bound nothing refuses');
});
