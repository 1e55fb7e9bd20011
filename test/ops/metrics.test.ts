// The gauges and per-endpoint series as /metrics text shows them, from a GatewayMetrics fed by a plain source
// (prom-client's real registry): values per endpoint and pool, an endpoint never scraped left out of the
// signal gauges, readiness, and the per-endpoint series of a removed endpoint dropped (discovery churn
// cannot grow the exposition without bound).
import t from 'tap';
import { GatewayMetrics, type PoolView } from '../../src/observability/metrics.js';
import { parseProm, metric } from '../e2e/support.js';

function source(pools: PoolView[], ready = true) {
  return {
    pools: () => pools,
    readiness: () => ({ ready, models: [{ model: 'm', ready }] }),
  };
}

const live = { endpoint: 'a:1', signals: { waiting: 3, running: 5, kvUsage: 0.25 }, age_ms: 120, stale: false, in_flight: 2, waiting_estimate: 4, saturated: false, eligible: true };
const never = { endpoint: 'b:1', signals: null, age_ms: null, stale: true, in_flight: 0, waiting_estimate: 0, saturated: true, eligible: false, ejected_for_ms: 500 };

t.test('endpoint and pool gauges, readiness', async (t) => {
  const m = new GatewayMetrics(source([{ pool: 'p', endpoints: [live, never] }], false), { processMetrics: false });
  const s = parseProm(await m.registry.metrics());
  t.equal(metric(s, 'infergate_endpoint_queue_waiting', { endpoint: 'a:1', pool: 'p' }), 3);
  t.equal(metric(s, 'infergate_endpoint_running', { endpoint: 'a:1' }), 5);
  t.equal(metric(s, 'infergate_endpoint_kv_cache_usage_ratio', { endpoint: 'a:1' }), 0.25);
  t.equal(metric(s, 'infergate_endpoint_metrics_age_seconds', { endpoint: 'a:1' }), 0.12);
  t.notOk(s.some((x) => x.name === 'infergate_endpoint_queue_waiting' && x.labels.endpoint === 'b:1'), 'no signal values for an endpoint never scraped');
  t.notOk(s.some((x) => x.name === 'infergate_endpoint_metrics_age_seconds' && x.labels.endpoint === 'b:1'), 'nor an age');
  t.equal(metric(s, 'infergate_endpoint_stale', { endpoint: 'b:1' }), 1);
  t.equal(metric(s, 'infergate_endpoint_ejected', { endpoint: 'b:1' }), 1);
  t.equal(metric(s, 'infergate_endpoint_eligible', { endpoint: 'a:1' }), 1);
  t.equal(metric(s, 'infergate_pool_endpoints', { pool: 'p' }), 2);
  t.equal(metric(s, 'infergate_pool_eligible_endpoints', { pool: 'p' }), 1);
  t.equal(metric(s, 'infergate_pool_queue_waiting', { pool: 'p' }), 4);
  t.equal(metric(s, 'infergate_pool_in_flight', { pool: 'p' }), 2);
  t.equal(metric(s, 'infergate_pool_saturated', { pool: 'p' }), 0, 'one endpoint not saturated: the pool is not');
  t.equal(metric(s, 'infergate_ready'), 0);
  t.equal(metric(s, 'infergate_model_ready', { model: 'm' }), 0);
});

t.test('a removed endpoint\'s request and TTFT series are dropped', async (t) => {
  const m = new GatewayMetrics(source([]), { processMetrics: false });
  m.endpointDone('p', 'a:1', 200, 0.1);
  m.endpointDone('p', 'b:1', 200, 0.2);
  m.endpointDone('p', 'b:1', 502, null);
  let s = parseProm(await m.registry.metrics());
  t.equal(metric(s, 'infergate_endpoint_requests_total', { endpoint: 'b:1' }), 2);
  t.equal(metric(s, 'infergate_endpoint_time_to_first_token_seconds_count', { endpoint: 'b:1' }), 1, 'TTFT only when a first byte came');
  m.retainEndpoints(new Set(['a:1']));
  s = parseProm(await m.registry.metrics());
  t.notOk(s.some((x) => x.labels.endpoint === 'b:1'), 'nothing left of b:1');
  t.equal(metric(s, 'infergate_endpoint_requests_total', { endpoint: 'a:1' }), 1, 'a:1 kept');
  m.endpointDone('p', 'b:1', 200, 0.3); // it came back
  s = parseProm(await m.registry.metrics());
  t.equal(metric(s, 'infergate_endpoint_requests_total', { endpoint: 'b:1' }), 1, 'counted afresh when it returns');
});
