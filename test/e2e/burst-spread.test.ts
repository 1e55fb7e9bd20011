// A burst of concurrent streaming requests that share one long prefix is spread once queues form on the
// pod that holds the prefix: the servers run at most 4 sequences each and decode slowly, so a pod that
// takes the whole burst keeps most of it waiting.
import t from 'tap';
import type { Test } from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, longText, countBy, type RunningGateway } from './support.js';

const mocks = await startMocks(4, ['--model', 'test-model', '--time-scale', '10', '--max-num-seqs', '4', '--decode-ms', '40', '--seed', '2']);
t.teardown(() => mocks.kill());

async function gateway(queueDepth: number): Promise<RunningGateway> {
  const gw = await startGateway(
    gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', saturation: { queue_depth: queueDepth, kv_cache: 0.8, retry_after: 'auto' } } }),
  );
  t.teardown(() => gw.stop());
  return gw;
}

async function burst(t: Test, gw: RunningGateway, prefix: string) {
  const system = longText(prefix, 6000); // ≈ 1500 tokens, shared by every request
  const body = (i: number) => ({
    model: 'test-model', stream: true, max_tokens: 48,
    messages: [{ role: 'system', content: system }, { role: 'user', content: `Request ${i}: summarise.` }],
  });
  // one pod already holds the prefix, as it would in a running service
  const warm = await chat(gw.url, body(-1));
  t.equal(warm.status, 200, 'warm-up request');
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => chat(gw.url, body(i))));
  const per = countBy(results.map((r) => r.endpoint));
  t.comment(`placement ${JSON.stringify([...per.values()])} in ${Date.now() - t0} ms (warm pod got ${per.get(warm.endpoint) ?? 0})`);
  t.same([...countBy(results.map((r) => r.status))], [[200, 50]], 'every request answered 200');
  t.equal(results.filter((r) => r.complete).length, 50, 'every stream ended with data: [DONE]');
  t.ok(per.size > 1, `${per.size} endpoints served the burst`);
  const most = Math.max(...per.values());
  t.ok(most <= 30, `the busiest endpoint served ${most}/50 (at most 60%)`);
}

t.test('50 concurrent streams, one shared prefix, queue_depth 16: spread over the pool, none lost', async (t) => {
  await burst(t, await gateway(16), 'burst-a');
});

t.test(
  '50 concurrent streams, one shared prefix, saturation off: the scored policy alone spreads them',
  async (t) => {
    await burst(t, await gateway(0), 'burst-b');
  },
);
