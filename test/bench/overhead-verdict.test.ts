/**
 * `overhead`'s verdict: each target of issue 18 with its value and met / not met, judged from the figures a
 * run wrote (pure: figures in, verdict out).
 */
import t from 'tap';
import { OVERHEAD_TARGETS, overheadVerdict } from '../../native-bench/overhead.js';

const cell = (name: string, mode: 'json' | 'sse', connections: number, errors = 0) => ({ name, mode, connections, errors, non2xx: 0 });
const conns = [10, 50, 200];
const entries = conns.flatMap((c) => ['nginx', 'relay', 'infergate'].flatMap((n) => [cell(n, 'json', c), cell(n, 'sse', c)]));
const ratios = (json: number[], sse: number[]) => conns.flatMap((c, i) => [
  { mode: 'json', connections: c, infergate_vs_relay: json[i], infergate_vs_nginx: 0.5 },
  { mode: 'sse', connections: c, infergate_vs_relay: 1.2, infergate_vs_nginx: sse[i] },
]);
const added = (gJson: number, nJson: number, valid = true) => [
  { name: 'nginx', mode: 'json', added_p50_ms: nJson, valid }, { name: 'infergate', mode: 'json', added_p50_ms: gJson, valid },
  { name: 'nginx', mode: 'sse', added_p50_ms: 0.1, valid: true }, { name: 'infergate', mode: 'sse', added_p50_ms: 0.12, valid: true },
];

t.test('json is judged at its worst connection count, sse at the median one', async (t) => {
  const v = overheadVerdict(entries, ratios([0.9, 0.86, 0.95], [0.8, 1.02, 0.9]), added(0.02, 0.02), conns);
  t.match(v.items[0], { value: 0.86, met: true, valid: true, limit: `≥ ${OVERHEAD_TARGETS.json_infergate_vs_relay_min}` });
  t.same(v.items[0].per_connections, [{ connections: 10, value: 0.9 }, { connections: 50, value: 0.86 }, { connections: 200, value: 0.95 }]);
  t.match(v.items[1], { value: 1.02, met: true, connections: 50 }, 'median of 10, 50, 200 is 50: its 1.02 counts, not the 0.8 at 10');
  t.match(v.items[2], { value: 1, met: true });
  t.match(v.items[3], { value: 1.2, met: true });
  t.equal(v.met, true);
});

t.test('one connection count under 0.85 fails json; a slow added latency fails its mode', async (t) => {
  const v = overheadVerdict(entries, ratios([0.9, 0.73, 0.95], [1.1, 1.1, 1.1]), added(0.05, 0.02), conns);
  t.match(v.items[0], { value: 0.73, met: false });
  t.match(v.items[2], { value: 2.5, met: false });
  t.equal(v.met, false);
});

t.test('what was not run is not measured; errors and a lagging client make an item not valid', async (t) => {
  const some = overheadVerdict(entries, ratios([0.9, 0.9, 0.9], [1, 1, 1]).filter((r) => r.connections !== 200), [], conns);
  t.match(some.items[0], { value: null, met: null });
  t.match(some.items[2], { value: null, met: null });
  t.equal(some.met, null, 'not all measured');
  const bad = entries.map((e) => (e.name === 'relay' && e.mode === 'json' && e.connections === 10 ? { ...e, errors: 3 } : e));
  const v = overheadVerdict(bad, ratios([0.9, 0.9, 0.9], [1, 1, 1]), added(0.02, 0.02, false), conns);
  t.equal(v.items[0].valid, false, 'socket errors in a json cell');
  t.equal(v.items[1].valid, true);
  t.equal(v.items[2].valid, false, 'open-loop client lagged');
  const zero = overheadVerdict(entries, ratios([0.9, 0.9, 0.9], [1, 1, 1]), added(0.01, -0.01), conns);
  t.match(zero.items[2], { value: null, met: false }, 'nginx added nothing: infergate adding 0.01 ms is not within 1.5×');
});
