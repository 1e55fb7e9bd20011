// Bursts into idle capacity are admitted; real overload is still refused (hardening item 10). The gateway
// used to count every request sent since the last scrape as waiting, so 20 simultaneous streams onto two
// idle pods that batch 16 each got 8 × 429. Now a 429 needs evidence: a scraped queue, work beyond a known
// batch capacity, or requests of ours long past the pod's time to first token.
import t from 'tap';
import type { Test } from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, countBy, debugPools, scrape, metric, until, type ChatResult, type RunningGateway } from './support.js';

const body = (tag: string, i: number, maxTokens: number) => ({
  model: 'test-model', stream: true, max_tokens: maxTokens,
  messages: [{ role: 'user', content: `${tag} ${i}: write a short essay about the sea` }],
});

/** Every endpoint of pool p has fresh metrics showing nothing running or waiting. */
async function idle(gw: RunningGateway): Promise<void> {
  await until(
    async () => (await debugPools(gw)).p.endpoints.every((e) => !e.stale && e.signals !== null && e.signals.running === 0 && e.signals.waiting === 0 && e.in_flight === 0),
    10_000,
    'every endpoint fresh and idle',
  );
}

function checkRejections(t: Test, rejected: ChatResult[]): void {
  let bad = 0;
  for (const r of rejected) {
    const ra = r.headers.get('retry-after');
    const body = JSON.parse(r.body) as { error?: { code?: unknown; type?: unknown; message?: unknown } };
    const ok = ra !== null && /^\d+$/.test(ra) && Number(ra) >= 1 && Number(ra) <= 60 && body.error?.code === 'pool_saturated' && typeof body.error.message === 'string';
    if (!ok && bad++ === 0) t.fail(`a 429 without integer Retry-After 1-60 or an OpenAI error body: ${ra} ${r.body}`);
  }
  t.equal(bad, 0, `all ${rejected.length} rejections carry Retry-After and an OpenAI error body`);
}

t.test('20 simultaneous streams onto 2 idle pods that batch 16 each: every one served, no 429', async (t) => {
  const mocks = await startMocks(2, ['--model', 'test-model', '--max-num-seqs', '16', '--seed', '11']);
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }));
  t.teardown(async () => {
    await gw.stop();
    await mocks.kill();
  });
  for (let round = 1; round <= 2; round++) {
    await idle(gw);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(gw.url, body(`burst ${round}`, i, 32))));
    const statuses = countBy(results.map((r) => r.status));
    t.comment(`round ${round}: statuses ${JSON.stringify([...statuses])}, placement ${JSON.stringify([...countBy(results.map((r) => r.endpoint))])}`);
    t.same([...statuses], [[200, 20]], `round ${round}: 20 × 200, no 429`);
    t.equal(results.filter((r) => r.complete).length, 20, `round ${round}: every stream ended with data: [DONE]`);
  }
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'saturated' }), 0, 'infergate_rejected_total{reason="saturated"} stays 0');
  let served = 0;
  for (const ep of mocks.endpoints) served += metric(await scrape(`http://${ep}`), 'vllm:request_success_total');
  t.equal(served, 40, 'the pods served all 40');
});

t.test('real overload (pods that run one sequence, waves of requests) still gets 429 with Retry-After', async (t) => {
  const mocks = await startMocks(2, ['--model', 'test-model', '--max-num-seqs', '1', '--seed', '12']);
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }));
  t.teardown(async () => {
    await gw.stop();
    await mocks.kill();
  });
  await idle(gw);
  // six waves of 10, 150 ms apart: each pod finishes about one 48-token request per 0.6 s, so queues build
  // up that the scrapes show (and our requests go far past the pods' first-token time)
  const pending: Promise<ChatResult>[] = [];
  for (let wave = 0; wave < 6; wave++) {
    for (let i = 0; i < 10; i++) pending.push(chat(gw.url, body(`wave ${wave}`, i, 48)));
    await new Promise((r) => setTimeout(r, 150));
  }
  const results = await Promise.all(pending);
  const statuses = countBy(results.map((r) => r.status));
  t.comment(`statuses ${JSON.stringify([...statuses])}`);
  t.same([...statuses.keys()].sort(), [200, 429], 'only 200 and 429 answers');
  const rejected = results.filter((r) => r.status === 429);
  const ok = results.filter((r) => r.status === 200);
  t.ok(rejected.length >= 20, `${rejected.length} of 60 rejected`);
  t.equal(ok.filter((r) => r.complete).length, ok.length, `every admitted stream (${ok.length}) completed`);
  checkRejections(t, rejected);
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'saturated' }), rejected.length, 'each 429 counted as saturated');
});

t.test('a configured batch capacity (max_num_seqs: 1) refuses the excess of one simultaneous burst at once', async (t) => {
  const mocks = await startMocks(2, ['--model', 'test-model', '--max-num-seqs', '1', '--seed', '13']);
  const gw = await startGateway(
    gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }),
  );
  t.teardown(async () => {
    await gw.stop();
    await mocks.kill();
  });
  await idle(gw);
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => chat(gw.url, body('seats', i, 64))));
  const rejected = results.filter((r) => r.status === 429);
  const ok = results.filter((r) => r.status === 200);
  t.comment(`statuses ${JSON.stringify([...countBy(results.map((r) => r.status))])}`);
  // per pod: one seat and a queue of at most 5 — never more than 12 admitted, whatever the timing
  t.ok(ok.length >= 2 && ok.length <= 12, `${ok.length} admitted (2 × (1 + 5) at most)`);
  t.equal(rejected.length, 30 - ok.length, 'the rest got 429');
  t.equal(ok.filter((r) => r.complete).length, ok.length, 'every admitted stream completed');
  checkRejections(t, rejected);
});
