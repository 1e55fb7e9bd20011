// Bursts into idle capacity are admitted; real overload is still refused (hardening item 10). The gateway
// used to count every request sent since the last scrape as waiting, so 20 simultaneous streams onto two
// idle pods that batch 16 each got 8 × 429. Now a 429 needs evidence: a scraped queue, work beyond a known
// batch capacity, or requests of ours long past the pod's time to first token.
import t from 'tap';
import type { Test } from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, countBy, debugPools, scrape, metric, until, type RunningGateway } from './support.js';

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

function checkRejections(t: Test, rejected: Array<{ headers: Headers; body: string }>): void {
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

/** A streaming request whose promise settles at the answer's head: a refusal is read whole, a 200 is left open. */
interface Opened {
  status: number;
  headers: Headers;
  body: string;
}
function open(url: string, payload: Record<string, unknown>, signal: AbortSignal): Promise<Opened> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload), signal }).then(
    async (r) => ({ status: r.status, headers: r.headers, body: r.status === 200 ? '' : await r.text() }),
    () => ({ status: 0, headers: new Headers(), body: '' }),
  );
}

type PoolView = { saturated: boolean; queued: number; in_flight: number; endpoint: string };
const pool = async (gw: RunningGateway) => (await debugPools(gw)).p.endpoints as unknown as PoolView[];

// Slow pods (one sequence each, 100 tokens at 51 ms: 5 s a request), so a queue, once formed, stays for
// seconds whatever the machine's speed; the streams left open are aborted at the end.
const SLOW = ['--model', 'test-model', '--max-num-seqs', '1', '--decode-ms', '50'];

t.test('real overload (pods that run one sequence) still gets 429 with Retry-After', async (t) => {
  const mocks = await startMocks(2, [...SLOW, '--seed', '12']);
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }));
  const abort = new AbortController();
  t.teardown(async () => {
    abort.abort();
    await gw.stop();
    await mocks.kill();
  });
  await idle(gw);
  // load the pods one request at a time until the gateway sees both saturated (at most 30)
  const fill: Promise<Opened>[] = [];
  const both = await until(
    async () => {
      const eps = await pool(gw);
      if (eps.every((e) => e.saturated)) return eps;
      if (fill.length < 30) fill.push(open(gw.url, body('fill', fill.length, 100), abort.signal));
      return null;
    },
    15_000,
    'both pods saturated',
  );
  t.comment(`saturated after ${fill.length} requests: ${JSON.stringify(both.map((e) => ({ queued: e.queued, in_flight: e.in_flight })))}`);
  t.ok(both.every((e) => e.queued >= 5), 'each shows a queue of at least queue_depth (scraped, or ours late for a first byte)');
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => open(gw.url, body('over', i, 100), abort.signal)));
  t.same([...countBy(results.map((r) => r.status))], [[429, 20]], 'all 20 further requests refused with 429');
  checkRejections(t, results);
  const m = await scrape(gw.adminUrl);
  t.ok(metric(m, 'infergate_rejected_total', { reason: 'saturated' }) >= 20, 'counted as saturated');
});

t.test('a configured batch capacity (max_num_seqs: 1) refuses the excess of one simultaneous burst at once', async (t) => {
  const mocks = await startMocks(2, [...SLOW, '--seed', '13']);
  const gw = await startGateway(
    gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }),
  );
  const abort = new AbortController();
  t.teardown(async () => {
    abort.abort();
    await gw.stop();
    await mocks.kill();
  });
  await idle(gw);
  const answers: Opened[] = [];
  for (let i = 0; i < 30; i++) void open(gw.url, body('seats', i, 100), abort.signal).then((r) => answers.push(r));
  // every request is either in flight at a pod or answered 429
  const admitted = await until(
    async () => {
      const inFlight = (await pool(gw)).reduce((s, e) => s + e.in_flight, 0);
      const refused = answers.filter((r) => r.status === 429).length;
      return inFlight + refused === 30 ? inFlight : null;
    },
    15_000,
    'all 30 requests admitted or refused',
  );
  const rejected = answers.filter((r) => r.status === 429);
  t.comment(`${admitted} admitted, ${rejected.length} refused`);
  // per pod one seat and a queue of 5: about 12 are admitted when the 30 arrive together; on a loaded
  // machine they arrive over several scrapes, each of which shows the pods a little fuller, so how many get
  // in depends on the timing. What holds either way: both pods get work and the excess is refused.
  t.ok(admitted >= 2, `${admitted} admitted (both pods get work)`);
  t.ok(rejected.length >= 1 && admitted < 30, `the excess is refused (${rejected.length} of 30)`);
  checkRejections(t, rejected);
});
