// A server whose /metrics stops answering (while inference goes on) goes stale in /debug/pools; the gateway
// keeps routing on its own accounting and no request fails. When the metrics come back, so does freshness.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, countBy, debugPools, scrape, metric, until } from './support.js';

const mocks = await startMocks(3, ['--model', 'test-model', '--time-scale', '20', '--seed', '3']);
const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', metrics: { interval: '100ms', stale_after: '1s' } } }));
const hung = mocks.endpoints[0];
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

async function setMetricsFault(endpoint: string, mode: 'ok' | 'hang') {
  const r = await fetch(`http://${endpoint}/mock/faults`, { method: 'POST', body: JSON.stringify({ metrics: mode }) });
  return (await r.json()) as { metrics: string };
}

const state = async () => (await debugPools(gw)).p.endpoints.find((e) => e.endpoint === hung)!;

t.test('a hung /metrics makes the endpoint stale, and every request still succeeds', async (t) => {
  await until(async () => !(await state()).stale, 5_000, 'fresh metrics from every endpoint');
  t.equal((await setMetricsFault(hung, 'hang')).metrics, 'hang', 'the mock reports the fault');
  const s = (await until(async () => ((await state()).stale ? state() : null), 5_000, `${hung} stale in /debug/pools`))!;
  t.equal(s.stale, true, 'stale');
  t.ok(s.age_ms! > 1000, `its metrics are ${s.age_ms} ms old`);
  t.ok(s.scrape_failures > 0, `scrape failures counted (${s.scrape_failures})`);
  t.equal(s.eligible, true, 'still eligible: stale signals are not used, the endpoint is not dropped');

  const results = [];
  for (let wave = 0; wave < 4; wave++) {
    results.push(
      ...(await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          chat(gw.url, { model: 'test-model', stream: true, max_tokens: 24, messages: [{ role: 'user', content: `wave ${wave} request ${i}: say something` }] }),
        ),
      )),
    );
  }
  t.same([...countBy(results.map((r) => r.status))], [[200, 32]], 'all 32 answered 200');
  t.equal(results.filter((r) => r.complete).length, 32, 'all 32 streams complete');
  const per = countBy(results.map((r) => r.endpoint));
  t.comment(`placement ${JSON.stringify([...per])}`);
  t.ok((per.get(hung) ?? 0) > 0, `the stale endpoint still served ${per.get(hung) ?? 0} (own accounting only)`);
  t.ok(per.size === 3, 'all three endpoints served');
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_upstream_errors_total'), 0, 'no upstream errors');
  t.equal(metric(m, 'infergate_requests_total', { code: '200' }), 32, 'infergate_requests_total counts 32 answers with code 200');
  t.ok(metric(m, 'infergate_endpoint_metrics_age_seconds', { endpoint: hung }) > 1, 'infergate_endpoint_metrics_age_seconds shows the age');
});

t.test('metrics answering again: the endpoint is fresh again', async (t) => {
  t.equal((await setMetricsFault(hung, 'ok')).metrics, 'ok');
  const s = (await until(async () => ((await state()).stale ? null : state()), 5_000, `${hung} fresh again`))!;
  t.equal(s.stale, false);
  t.ok(s.age_ms! < 1000, `age ${s.age_ms} ms`);
});
