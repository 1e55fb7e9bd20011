// Retries, long answers and ejection, with real `infergate mock` processes and a real gateway: a whole
// (non-streamed) answer that outlasts the first-byte deadline completes on its first pod; one that
// outlasts response_timeout is cancelled there (504, no retry); a refused or reset connection is retried
// elsewhere; a storm against a failing pool retries no more than its budget; and ejection never takes more
// than max_ejection_percent of a pool.
import t, { type Test } from 'tap';
import { request } from 'undici';
import { startMocks, startGateway, gatewayConfig, until, scrape, metric, type Mocks, type RunningGateway } from '../e2e/support.js';
import { freePort } from '../helpers/process.js';
import { startUpstream, streamSse, sseBody, withoutUsage } from '../helpers/upstream.js';

interface MockState {
  completions: number;
  aborted: number;
  running: number;
  waiting: number;
}

async function mockState(endpoint: string): Promise<MockState> {
  const r = await request(`http://${endpoint}/mock/state`);
  return (await r.body.json()) as MockState;
}

async function setFaults(endpoint: string, faults: Record<string, unknown>): Promise<void> {
  const r = await request(`http://${endpoint}/mock/faults`, { method: 'POST', body: JSON.stringify(faults) });
  if (r.statusCode !== 200) throw new Error(`mock faults: ${r.statusCode} ${await r.body.text()}`);
  await r.body.dump();
}

function chat(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'tell me a long story' }], ...extra });
}

async function ask(gw: RunningGateway, body: string): Promise<{ status: number; text: string }> {
  const r = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: r.statusCode, text: await r.body.text() };
}

async function gatewayMetric(gw: RunningGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  return metric(await scrape(gw.adminUrl), name, labels);
}

async function started(t: Test, count: number, args: string[]): Promise<Mocks> {
  const mocks = await startMocks(count, ['--model', 'test-model', ...args]);
  t.teardown(() => mocks.kill());
  return mocks;
}

async function gateway(t: Test, config: unknown): Promise<RunningGateway> {
  const gw = await startGateway(config);
  t.teardown(() => gw.stop());
  return gw;
}

t.test('a whole answer that outlasts first_byte_timeout completes on its first pod, without a retry', async (t) => {
  // 60 tokens at 20 ms a token: over a second before the answer's first byte, five times the deadline
  const mocks = await started(t, 2, ['--decode-ms', '20']);
  const gw = await gateway(t, gatewayConfig(mocks.endpoints, { over: { limits: { first_byte_timeout: '200ms', response_timeout: '30s' } } }));
  const r = await ask(gw, chat({ max_tokens: 60 }));
  t.equal(r.status, 200, r.text.slice(0, 200));
  const body = JSON.parse(r.text) as { usage: { completion_tokens: number }; choices: Array<{ finish_reason: string }> };
  t.equal(body.usage.completion_tokens, 60, 'the whole answer');
  t.equal(body.choices[0].finish_reason, 'length');
  const states = await Promise.all(mocks.endpoints.map(mockState));
  t.equal(states.reduce((a, s) => a + s.completions, 0), 1, 'the mocks saw the request once');
  t.equal(states.reduce((a, s) => a + s.aborted, 0), 0, 'and nothing was cancelled');
  t.equal(await gatewayMetric(gw, 'infergate_retries_total'), 0, 'no retry counted');
  t.equal(await gatewayMetric(gw, 'infergate_upstream_errors_total'), 0, 'no upstream error counted');

  // a stream of the same length: its chunks come every 20 ms, well inside the same deadline between them
  const s = await ask(gw, chat({ max_tokens: 60, stream: true }));
  t.equal(s.status, 200);
  t.match(s.text, /data: \[DONE\]\n\n$/, 'the stream ends whole');
});

t.test('a whole answer past response_timeout: 504, cancelled on its pod, never retried', async (t) => {
  // 400 tokens at 20 ms a token: 8 s, far past the 500 ms allowed
  const mocks = await started(t, 2, ['--decode-ms', '20']);
  const gw = await gateway(t, gatewayConfig(mocks.endpoints, { over: { limits: { first_byte_timeout: '10s', response_timeout: '500ms' } } }));
  const r = await ask(gw, chat({ max_tokens: 400 }));
  t.equal(r.status, 504, r.text.slice(0, 200));
  t.equal((JSON.parse(r.text) as { error: { code: string } }).error.code, 'upstream_timeout', 'an OpenAI error');
  // the pod that had it sees the request cancelled (it stops generating), and no other pod ever gets it
  const states = await until(
    async () => {
      const all = await Promise.all(mocks.endpoints.map(mockState));
      return all.reduce((a, s) => a + s.aborted, 0) === 1 && all.every((s) => s.running === 0 && s.waiting === 0) ? all : null;
    },
    10_000,
    'the mock to see the request cancelled',
  );
  t.equal(states.reduce((a, s) => a + s.completions, 0), 1, 'sent once: no retry');
  t.equal(await gatewayMetric(gw, 'infergate_retries_total'), 0, 'no retry counted');
  t.equal(await gatewayMetric(gw, 'infergate_upstream_errors_total', { kind: 'timeout' }), 1, 'counted as a timeout');
});

t.test('a stream silent past first_byte_timeout: 504, cancelled, never retried', async (t) => {
  const silent = await startUpstream(() => undefined); // takes the request and never answers
  const body = sseBody(3);
  const healthy = await startUpstream((_req, res) => streamSse(res, body));
  t.teardown(async () => {
    await silent.close();
    await healthy.close();
  });
  // 2 s: the healthy endpoint (in this test's own process) must answer within it even on a loaded machine
  const gw = await gateway(t, gatewayConfig([silent.endpoint, healthy.endpoint], { over: { limits: { first_byte_timeout: '2s' } } }));
  // round robin: of two requests, one goes to each endpoint
  const answers = [await ask(gw, chat({ stream: true })), await ask(gw, chat({ stream: true }))];
  const timedOut = answers.filter((a) => a.status === 504);
  t.equal(timedOut.length, 1, 'the silent endpoint\'s request: 504');
  t.equal((JSON.parse(timedOut[0].text) as { error: { code: string } }).error.code, 'upstream_timeout');
  // the gateway asks for the usage chunk and keeps it from a client that did not ask for it
  t.ok(answers.some((a) => a.status === 200 && a.text === withoutUsage(body)), 'the other one served');
  t.equal(silent.received.length, 1);
  t.equal(healthy.received.length, 1, 'the timed-out request was not sent again');
  await until(() => silent.received[0].closedEarly, 5_000, 'the silent endpoint to see its request cancelled');
  t.equal(await gatewayMetric(gw, 'infergate_retries_total'), 0);
});

t.test('a refused connection and a reset before any byte are retried on another endpoint', async (t) => {
  const dead = await freePort();
  const mocks = await started(t, 2, ['--time-scale', '20']);
  const [resets, healthy] = mocks.endpoints;
  // `refuse`: the mock closes the connection as soon as the request arrives, before any answer byte
  await setFaults(resets, { fail_rate: 1, fail_mode: 'refuse' });
  const gw = await gateway(t, gatewayConfig([`127.0.0.1:${dead}`, resets, healthy], { over: { limits: { retries: 2 } } }));
  for (let i = 0; i < 6; i++) {
    const r = await ask(gw, chat({ max_tokens: 5 }));
    t.equal(r.status, 200, `request ${i}: served`);
  }
  t.equal((await mockState(healthy)).completions, 6, 'every request reached the healthy endpoint once');
  const m = await scrape(gw.adminUrl);
  t.ok(metric(m, 'infergate_retries_total', { reason: 'connect' }) >= 1, 'the refused connection was retried');
  t.ok(metric(m, 'infergate_retries_total', { reason: 'reset' }) >= 1, 'the reset was retried');
  t.equal(metric(m, 'infergate_retry_budget_exhausted_total'), 0, 'within the budget');
});

t.test('a storm against a failing pool retries no more than the retry budget allows', async (t) => {
  const dead = await freePort();
  // the retries land on a slow pod (100 tokens at 20 ms: 2 s), so they stay in progress during the storm
  const mocks = await started(t, 1, ['--decode-ms', '20']);
  const gw = await gateway(
    t,
    gatewayConfig([`127.0.0.1:${dead}`, mocks.endpoints[0]], {
      pool: { retry_budget: { budget_percent: 10, min_retry_concurrency: 1 }, saturation: { queue_depth: 0, kv_cache: 0 } },
      over: { limits: { retries: 1 } },
    }),
  );
  const N = 20;
  const answers = await Promise.all(Array.from({ length: N }, () => ask(gw, chat({ max_tokens: 100 }))));
  const ok = answers.filter((a) => a.status === 200).length;
  const failed = answers.filter((a) => a.status !== 200);
  t.ok(failed.every((a) => a.status === 502 && (JSON.parse(a.text) as { error: { code: string } }).error.code === 'upstream_unavailable'), 'the rest: 502 upstream_unavailable');
  const m = await scrape(gw.adminUrl);
  const retries = metric(m, 'infergate_retries_total');
  const exhausted = metric(m, 'infergate_retry_budget_exhausted_total');
  const refused = metric(m, 'infergate_upstream_errors_total', { kind: 'connect' });
  t.ok(refused >= 3, `the dead endpoint failed ${refused} requests before its ejection`);
  // at most 10% of the 20 requests in progress (2), or the minimum of 1, retried at once
  t.ok(retries >= 1 && retries <= 2, `${retries} retries: within the budget`);
  t.equal(exhausted, refused - retries, `${exhausted} failures not retried: the budget was spent`);
  t.equal(failed.length, exhausted, 'each of them answered with its own failure');
  t.equal(ok, N - exhausted, 'every other request served');
  t.equal((await mockState(mocks.endpoints[0])).completions, ok, 'the healthy pod saw only the requests it served');
});

interface PoolDebug {
  ejection: { ejected: number; max_ejected: number; max_ejection_percent: number };
  endpoints: Array<{ endpoint: string; ejected_for_ms?: number; ejections_total: number; ejections_held_back: number }>;
}

t.test('ejection never takes more than max_ejection_percent of a pool', async (t) => {
  const mocks = await started(t, 4, ['--time-scale', '20']);
  const [healthy, ...failing] = mocks.endpoints;
  for (const ep of failing) await setFaults(ep, { fail_rate: 1, fail_mode: '500' });
  const gw = await gateway(t, gatewayConfig(mocks.endpoints, { pool: { max_ejection_percent: 50 }, over: { limits: { retries: 0 } } }));
  const pools = async () => {
    const r = await request(`${gw.adminUrl}/debug/pools`);
    return ((await r.body.json()) as Record<string, PoolDebug>).p;
  };
  let most = 0;
  let codes = new Set<number>();
  let last: PoolDebug | undefined;
  // every failing endpoint gets three errors in a row many times over; at most two of the four may go out
  for (let i = 0; i < 60; i++) {
    const r = await ask(gw, chat({ max_tokens: 3 }));
    codes.add(r.status);
    last = await pools();
    const ejected = last.endpoints.filter((e) => (e.ejected_for_ms ?? 0) > 0);
    most = Math.max(most, ejected.length);
    t.notOk(ejected.some((e) => e.endpoint === healthy), 'the healthy endpoint is never ejected');
    if (ejected.length === 2 && last.endpoints.some((e) => e.ejections_held_back > 0)) break;
  }
  codes = new Set([...codes].sort());
  t.same([...codes], [200, 500], 'the failing pods\' 500s pass through as they are');
  t.equal(most, 2, 'two of four ejected at most (50%)');
  t.equal(last!.ejection.max_ejected, 2);
  t.equal(last!.ejection.ejected, 2, '/debug/pools shows the two');
  const heldBack = last!.endpoints.filter((e) => e.ejections_held_back > 0);
  t.equal(heldBack.length, 1, 'the third failing endpoint was held back, not ejected');
  t.ok(failing.includes(heldBack[0].endpoint));
  const m = await scrape(gw.adminUrl);
  t.ok(metric(m, 'infergate_ejections_total', { reason: 'consecutive_errors' }) >= 2, 'ejections counted');
  t.ok(metric(m, 'infergate_ejections_held_back_total', { endpoint: heldBack[0].endpoint }) >= 1, 'the held-back ejection counted');
  t.ok(metric(m, 'infergate_endpoint_ejected') <= 2, 'the ejected gauge agrees');
});
