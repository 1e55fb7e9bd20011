// A request still waiting in a pool's queue when the gateway stops: the drain lets it wait (it counts as
// in flight), and when drain_timeout passes it is answered 503 shutting_down, like the requests cut
// upstream; the process exits and the model server never saw it.
import t from 'tap';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startMocks, scrape, metric, debugPools, mockMetric } from '../e2e/support.js';

const mocks = await startMocks(1, ['--model', 'test-model', '--max-num-seqs', '1', '--decode-ms', '20', '--seed', '6']);
t.teardown(() => mocks.kill());
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, {
    pool: { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 1, kv_cache: 0.9, retry_after: '1s' }, queue: { max_length: 10, max_wait: '60s' } },
    over: { limits: { drain_timeout: '1s' } },
  }),
);
t.teardown(() => gw.proc.kill());

const send = (tag: string, maxTokens: number) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: maxTokens, messages: [{ role: 'user', content: tag }] }),
    signal: AbortSignal.timeout(60_000),
  }).then(
    async (r) => ({ status: r.status, body: await r.text() }),
    (e: unknown) => ({ status: 0, body: String(e) }),
  );

t.test('queued at SIGTERM: 503 shutting_down when the drain ends', async (t) => {
  const fillers = [send('filler 1', 1000), send('filler 2', 1000)]; // 20 s each: longer than the drain
  await until(async () => (await debugPools(gw)).p.endpoints.every((e) => e.signals !== null && e.signals.waiting >= 1 && !e.eligible), 10_000, 'the pool saturated');
  const queued = send('waits', 2);
  await until(async () => metric(await scrape(gw.adminUrl), 'infergate_queue_length', { priority: 'standard' }) === 1, 10_000, 'the request queued');
  const before = await mockMetric(mocks.endpoints[0], 'vllm:request_success_total');
  const exited = gw.stop();
  const r = await queued;
  t.equal(r.status, 503, 'the queued request: 503');
  t.match(JSON.parse(r.body), { error: { code: 'shutting_down' } });
  t.equal(await exited, 0, 'the gateway exited 0');
  const cut = await Promise.all(fillers);
  t.ok(cut.every((f) => (f.status === 200 && f.body.includes('shutting_down')) || f.status === 503 || f.status === 0), 'the fillers were cut too (a stream ends with the shutting_down event, one still waiting for its first byte gets 503)');
  await until(async () => (await mockMetric(mocks.endpoints[0], 'vllm:num_requests_running')) === 0, 10_000, 'the server to drop the cut fillers');
  t.equal((await mockMetric(mocks.endpoints[0], 'vllm:request_success_total')) - before, 2, 'the server ended only the two fillers (cancelled)');
});
