// Issue #17's overload targets, checked on hand-made results (the figures a run reports), and printed by
// `simulate --targets` on a real run.
import t from 'tap';
import { checkOverloadTargets, formatOverloadTargets, simulateMain, type SimResult } from '../../src/sim/index.js';

function result(trace: string, runs: Array<[policy: string, shed: number, goodput: number, hit: number]>): SimResult {
  return {
    workload: { trace },
    runs: runs.map(([policy, shed_share, goodput_rps, prefix_cache_hit_rate]) => ({ policy, shed_share, prefix_cache_hit_rate, slo: [{ goodput_rps }] })),
  } as unknown as SimResult;
}

t.test('each target against its limit, computed by hand', async (t) => {
  // oracle: shed 10%, goodput 4, hit 20%: limits goodput ≥ 3.8, hit ≥ 0.18, shed ≤ 0.115
  const pass = checkOverloadTargets(result('trace', [['scored', 0.115, 3.8, 0.18], ['oracle', 0.1, 4, 0.2], ['least_request', 0, 9, 0]]));
  t.ok(pass.applies);
  t.same(pass.checks.map((c) => [c.name, c.pass]), [
    ['scored goodput ≥ 0.95 × oracle', true],
    ['scored hit rate ≥ 0.9 × oracle', true],
    ['scored shed share ≤ 1.1 × oracle + 0.005', true],
  ], 'a trace with sharing: no least_request check');
  const miss = checkOverloadTargets(result('trace', [['scored', 0.116, 3.79, 0.179], ['oracle', 0.1, 4, 0.2]]));
  t.same(miss.checks.map((c) => c.pass), [false, false, false], 'just past each limit');
  t.same(miss.checks.map((c) => c.limit), [3.8, 0.18, 0.115]);
  t.match(formatOverloadTargets(miss), /MISS {2}scored shed share ≤ 1\.1 × oracle \+ 0\.005: 0\.116 vs 0\.115/);
});

t.test('no-sharing: no hit-rate check, and goodput against least_request at every load', async (t) => {
  const r = checkOverloadTargets(result('no-sharing', [['scored', 0, 7, 0], ['oracle', 0, 7.2, 0], ['least_request', 0, 7.01, 0]]));
  t.same(r.checks.map((c) => [c.name, c.pass]), [
    ['scored goodput ≥ 0.95 × oracle', true],
    ['scored shed share ≤ 1.1 × oracle + 0.005', true],
    ['scored goodput ≥ least_request', false],
  ]);
  // the oracle sheds more than 25%: the oracle targets do not apply, least_request's still does
  const deep = checkOverloadTargets(result('no-sharing', [['scored', 0.5, 7, 0], ['oracle', 0.4, 0.5, 0], ['least_request', 0.3, 2, 0]]));
  t.notOk(deep.applies);
  t.same(deep.checks.map((c) => [c.name, c.pass]), [['scored goodput ≥ least_request', true]]);
  const none = checkOverloadTargets(result('rag', [['scored', 0.5, 7, 0.5], ['oracle', 0.4, 0.5, 0.5]]));
  t.same(none.checks, []);
  t.match(formatOverloadTargets(none), /do not apply \(the oracle sheds more than 25%\)/);
});

t.test('simulate --targets prints them', async (t) => {
  let out = '';
  const io = { out: (s: string) => void (out += s), err: () => {} };
  const code = await simulateMain(['--generate', 'no-sharing', '--requests', '150', '--endpoints', '4', '--policies', 'scored,least_request,oracle', '--targets'], io);
  t.equal(code, 0);
  t.match(out, /overload targets \(the oracle sheds \d+\.\d%\)\n {2}(PASS|MISS) {2}scored goodput ≥ 0\.95 × oracle: /);
  t.match(out, /(PASS|MISS) {2}scored goodput ≥ least_request: /);
});
