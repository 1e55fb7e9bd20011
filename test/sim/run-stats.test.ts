/**
 * A run's statistics from a hand-written sequence of request fates: figures, per-request records, and
 * unfinished requests counted as errors.
 */
import t from 'tap';
import { RunStats, type RequestRecord } from '../../src/sim/run-stats.js';
import type { SimRequest } from '../../src/sim/types.js';

const req = (arrivalMs: number): SimRequest => ({ arrivalMs, inputTokens: 10, outputTokens: 3, hashIds: [1] });

t.test('figures and records from request fates', async (t) => {
  const requests = [req(0), req(100), req(200), req(300)];
  const records: RequestRecord[] = [];
  const s = new RunStats(requests, 2, (r) => records.push(r));
  s.dispatched(0, 1);
  s.firstToken(0, 50, 10, 4);
  s.token(0, 0, 50);
  s.token(0, 1, 60);
  s.token(0, 2, 80);
  s.preempted();
  s.completedAt(0, 80, 3);
  s.rejectedAt(1, 100);
  s.failedAt(2, 200);
  s.dispatched(3, 0);
  const r = s.result('p', 1);
  t.match(r, {
    policy: 'p',
    requests: 4,
    completed: 1,
    errors: 2,
    rejected: 1,
    preemptions: 1,
    per_endpoint: [1, 1],
    prefix_cache_hit_rate: 0.4,
    duration_s: 0.08,
    throughput_rps: 12.5,
    output_tokens_per_s: 37.5,
  });
  t.same(r.ttft_ms, { p50: 50, p90: 50, p99: 50, mean: 50 });
  t.same(r.itl_ms, { p50: 15, p90: 19, p99: 19.9, mean: 15 });
  t.same(r.e2e_ms, { p50: 80, p90: 80, p99: 80, mean: 80 });
  t.same(records, [
    { index: 0, outcome: 'completed', endpoint: 1, ttftMs: 50, e2eMs: 80, cachedTokens: 4, outputTokens: 3 },
    { index: 1, outcome: 'rejected', endpoint: -1, ttftMs: NaN, e2eMs: 0, cachedTokens: 0, outputTokens: 0 },
    { index: 2, outcome: 'error', endpoint: -1, ttftMs: NaN, e2eMs: 0, cachedTokens: 0, outputTokens: 0 },
  ]);
});

t.test('an empty run', async (t) => {
  t.match(new RunStats([], 3).result('p', 0), { requests: 0, completed: 0, errors: 0, throughput_rps: 0, per_endpoint: [0, 0, 0] });
});

t.test('SLO attainment over offered requests: a rejection and a failure are misses (hand-computed)', async (t) => {
  // four offered: #0 completes (TTFT 50 ms, gaps 10 and 20 → mean ITL 15 ms), #1 is refused, #2 fails,
  // #3 completes late (TTFT 150 ms, one gap of 10 ms)
  const requests = [req(0), req(100), req(200), req(300)];
  const s = new RunStats(requests, 1, undefined, [{ ttftMs: 100, itlMs: 20 }, { ttftMs: 200, itlMs: 20 }, { ttftMs: 100, itlMs: 12 }]);
  s.dispatched(0, 0);
  s.firstToken(0, 50, 10, 0);
  s.token(0, 0, 50);
  s.token(0, 1, 60);
  s.token(0, 2, 80);
  s.completedAt(0, 80, 3);
  s.rejectedAt(1, 100);
  s.failedAt(2, 200);
  s.dispatched(3, 0);
  s.firstToken(3, 450, 10, 0);
  s.token(3, 0, 450);
  s.token(3, 1, 460);
  s.completedAt(3, 500, 2);
  const r = s.result('p', 0);
  t.equal(r.duration_s, 0.5, 'the run lasts from the first arrival to the last end');
  t.equal(r.shed_share, 0.25, '1 of 4 refused');
  // ≤ 100 ms / 20 ms: only #0 (1 of 4, not 1 of 2 completed); ≤ 200 ms: #0 and #3; mean ITL ≤ 12 ms: only #3's 10 ms, but it is late
  t.same(r.slo.map((x) => x.attainment), [0.25, 0.5, 0]);
  t.same(r.slo.map((x) => x.goodput_rps), [2, 4, 0], 'met requests per second of the run');
  // offered TTFTs sorted: 50, 150, never, never → p50 (rank 2) is 150, p90 and p99 fall on the unserved
  t.same(r.ttft_offered_ms, { p50: 150, p90: null, p99: null });
});

t.test('ITL per request: each completed request\'s mean and p99 gap, then their distribution (hand-computed)', async (t) => {
  // #0 and #1 stream at once (their tokens interleave); #2 has one output token (no gap); #3 streams, then
  // fails (not completed: left out, as its gaps are of an answer that never ended)
  const requests = [req(0), req(0), req(0), req(0)];
  const s = new RunStats(requests, 2);
  for (const i of [0, 1, 2, 3]) {
    s.dispatched(i, i % 2);
    s.firstToken(i, 10, 10, 0);
    s.token(i, 0, 10);
  }
  s.token(0, 1, 20); // #0 gaps: 10, 30
  s.token(1, 1, 14); // #1 gaps: 4, 4, 100
  s.token(3, 1, 500);
  s.token(1, 2, 18);
  s.token(0, 2, 50);
  s.token(1, 3, 118);
  s.completedAt(0, 50, 3);
  s.completedAt(1, 118, 4);
  s.completedAt(2, 10, 1);
  s.failedAt(3, 600);
  const r = s.result('p', 0);
  t.equal(r.itl_per_request_ms?.requests, 2, 'two completed requests have a gap');
  // means: #0 20, #1 36; p99s (interpolated): #0 10 + 0.99 × 20 = 29.8, #1 4 + 0.98 × 96 = 98.08 (rank 1.98 of 0..2)
  t.same(r.itl_per_request_ms?.mean, { p50: 28, p90: 34.4, p99: 35.84, mean: 28 });
  t.same(r.itl_per_request_ms?.p99, { p50: 63.94, p90: 91.252, p99: 97.397, mean: 63.94 });
  // pooled: 4, 4, 10, 30, 100 and the failed request's 490 → p50 20, p90 295, p99 470.5, mean 106.333
  t.same(r.itl_ms, { p50: 20, p90: 295, p99: 470.5, mean: 106.333 }, 'the pooled figure, beside it, mixes every gap');
});
