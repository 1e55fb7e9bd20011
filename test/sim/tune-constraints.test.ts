// --tune-constraints: the promises a tuned weight set must keep. Each check runs the scenario of the test
// that holds the promise for the shipped weights (test/sim/backlog-priority.test.ts,
// test/routing/overload-affinity.ts) with the candidate's weights instead; virtual time and fixed seeds, so
// the figures are exact.
import t from 'tap';
import { DEFAULT_WEIGHTS, type ScoringWeights } from '../../src/routing/index.js';
import { checkConstraint, parseConstraints, PRIORITY_LIMIT } from '../../src/sim/tune-constraints.js';

const setup = { pool: {}, profile: {} };
/** the weights before the constrained search: the boundaries below are probed around them, whatever ships */
const BASE: ScoringWeights = { prefix: 3, queue: 2, running: 1, kv_cache: 2, lora: 1, load: 2 };
const w = (o: Partial<ScoringWeights>): ScoringWeights => ({ ...BASE, ...o });

t.test('the shipped weights keep every constraint', async (t) => {
  for (const c of ['priority', 'affinity'] as const) {
    const d = checkConstraint(c, { ...DEFAULT_WEIGHTS }, setup);
    t.ok(d.ok, `${c}: ${d.detail}`);
  }
});

t.test('priority (issue #16): the earlier weights keep it, queue 0 / kv_cache 1 breaks it', async (t) => {
  const d = checkConstraint('priority', w({}), setup);
  t.equal(d.constraint, 'priority');
  t.ok(d.ok, d.detail);
  t.ok(d.figure <= PRIORITY_LIMIT, `defaults: ${d.detail}`);
  // the weights the search proposed before the overload work: the critical class waits far longer
  const q = checkConstraint('priority', w({ queue: 0, kv_cache: 1 }), setup);
  t.notOk(q.ok, q.detail);
  t.ok(q.figure > PRIORITY_LIMIT, `queue 0, kv_cache 1: ${q.detail}`);
  t.match(q.detail, /critical TTFT p99 at ×5\.5 \d+ ms = \d\.\d\d× unloaded \d+ ms \(limit 2×\)/);
  // the same answer again: a check is deterministic
  t.strictSame(checkConstraint('priority', w({ queue: 0, kv_cache: 1 }), setup), q);
});

t.test('affinity (issue #17): the holder keeps a loaded request within its saving, and no further', async (t) => {
  const d = checkConstraint('affinity', w({}), setup);
  t.ok(d.ok, d.detail);
  t.equal(d.figure, 4, 'all four picks as promised');
  // the first search's proposal: without the cache credit the holder still keeps a request 1.75× as costly
  const q = checkConstraint('affinity', w({ queue: 0, kv_cache: 1 }), setup);
  t.notOk(q.ok);
  t.equal(q.figure, 3);
  t.match(q.detail, /^not as promised: the same without the cache credit: load wins/);
  // an overwhelming prefix weight: the holder never gives way, not even to an idle endpoint
  const all = checkConstraint('affinity', w({ prefix: 100 }), setup);
  t.notOk(all.ok);
  t.equal(all.figure, 1);
  t.match(all.detail, /60k against 8k: the holder gives way/);
  t.match(all.detail, /the cold prefill goes to the idle one/);
  // the boundary the tune test relies on: prefix 6 keeps it, prefix 12 does not
  t.ok(checkConstraint('affinity', w({ prefix: 6 }), setup).ok);
  t.notOk(checkConstraint('affinity', w({ prefix: 12 }), setup).ok);
});

t.test('parsing the list', async (t) => {
  t.strictSame(parseConstraints('priority,affinity'), ['priority', 'affinity']);
  t.strictSame(parseConstraints(' affinity , affinity '), ['affinity']);
  t.strictSame(parseConstraints('none'), []);
  t.throws(() => parseConstraints('priority,latency'), /--tune-constraints takes priority, affinity \(comma-separated\) or none, not "latency"/);
});
