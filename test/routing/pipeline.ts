// The pick pipeline's pure pieces one by one: filters, each scorer over a hand-made candidate table, the
// registry, saturation and Retry-After.
import t from 'tap';
import { CandidateTable } from '../../src/routing/candidates.js';
import { EndpointState } from '../../src/routing/endpoint-state.js';
import { AdapterCatalog, servingAdapter, usable, type Filtered } from '../../src/routing/filters.js';
import { isSaturated, retryAfterS } from '../../src/routing/saturation.js';
import { DEFAULT_WEIGHTS, SCORERS, SCORER_NAMES, type Scorer } from '../../src/routing/scorers/index.js';
import { DEFAULT_POOL_OPTIONS, DEFAULT_TUNING, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});

function endpoint(id: number, o: Partial<EndpointState> = {}): EndpointState {
  return Object.assign(new EndpointState(id, `e${id}:1`), o);
}

type Row = Partial<{ st: EndpointState; fresh: boolean; saturated: boolean; waiting: number; running: number; inFlight: number; kv: number; matched: number; ahead: number; cost: number }>;

/**
 * A table with the given rows (the rest zero, fresh, unsaturated; `waiting` and `inFlight` set on the row's
 * endpoint, `waiting` also as the row's evidenced queue) and its aggregates as build() promises them: minima over the unsaturated rows, the free KV share
 * summed over the unsaturated fresh ones.
 */
function table(rows: Row[], o: { totalBlocks?: number; adapter?: string | null } = {}): CandidateTable {
  const t = new CandidateTable(DEFAULT_TUNING);
  t.n = rows.length;
  const live: Required<Row>[] = [];
  rows.forEach((r, i) => {
    const st = r.st ?? endpoint(i);
    const row = { fresh: true, saturated: false, waiting: 0, running: 0, inFlight: 0, kv: 0, matched: 0, ahead: 0, cost: 0, ...r, st };
    st.inFlight = row.inFlight;
    if (r.waiting !== undefined) st.sig = sig({ ...st.sig, waiting: r.waiting });
    t.st[i] = st;
    t.fresh[i] = row.fresh ? 1 : 0;
    t.saturated[i] = row.saturated ? 1 : 0;
    t.queued[i] = row.waiting;
    for (const k of ['running', 'kv', 'matched', 'ahead', 'cost'] as const) t[k][i] = row[k];
    if (!row.saturated) live.push(row);
  });
  t.minAhead = Math.min(...live.map((r) => r.ahead));
  t.minRunning = Math.min(...live.map((r) => r.running));
  t.minInFlight = Math.min(...live.map((r) => r.inFlight));
  t.minCost = Math.min(...live.map((r) => r.cost));
  const fresh = live.filter((r) => r.fresh);
  t.freshKvFree = fresh.reduce((a, r) => a + (1 - r.kv), 0);
  t.freshCount = fresh.length;
  t.totalBlocks = o.totalBlocks ?? 0;
  t.adapter = o.adapter ?? null;
  return t;
}

/** A scorer's own values: what it adds with weight 1 to a zeroed sum. */
function scores(s: Scorer, t: CandidateTable): number[] {
  const out = new Float64Array(t.n);
  s.score(t, 1, out);
  return [...out];
}

const byName = (name: string) => SCORERS.find((s) => s.name === name)!;

t.test('the registry: unique names, the schema defaults, append-only order', async (t) => {
  t.equal(new Set(SCORER_NAMES).size, SCORERS.length);
  t.strictSame([...SCORER_NAMES], ['prefix', 'queue', 'running', 'kv_cache', 'lora', 'load']);
  t.strictSame({ ...DEFAULT_WEIGHTS }, { prefix: 3, queue: 2, running: 1, kv_cache: 2, lora: 1, load: 2 });
});

t.test('filters: excluded and ejected out; all ejected → used anyway; adapters', async (t) => {
  const a = endpoint(0);
  const b = endpoint(1, { ejectedUntil: 100 });
  const c = endpoint(2);
  const filtered: Filtered = [];
  const out: EndpointState[] = [];
  t.strictSame(usable([a, b, c], new Set(['e2:1']), 50, out, filtered).map((s) => s.name), ['e0:1']);
  t.strictSame(filtered, [{ endpoint: 'e2:1', why: 'excluded' }, { endpoint: 'e1:1', why: 'ejected' }]);
  t.strictSame(usable([a, b], new Set(['e0:1']), 50, out, null).map((s) => s.name), ['e1:1'], 'never fail closed on ejections');
  t.strictSame(usable([a, b], undefined, 100, out, null).length, 2, 'ejection over');

  a.sig = sig({ adapters: ['sql'] });
  b.sig = sig({ adapters: [] });
  c.sig = sig(); // adapters unknown: kept
  const f2: Filtered = [];
  t.strictSame(servingAdapter([a, b, c], 'sql', f2).map((s) => s.name), ['e0:1', 'e2:1']);
  t.strictSame(f2, [{ endpoint: 'e1:1', why: 'adapter not served' }]);
  t.strictSame(servingAdapter([b], 'sql', null).map((s) => s.name), ['e1:1'], 'none serves it: all stay');

  const cat = new AdapterCatalog();
  cat.invalidate();
  t.ok(cat.isAdapter('sql', [a, b, c]));
  t.notOk(cat.isAdapter('m', [a, b, c]));
  b.sig = sig({ loraWaiting: ['chat'] });
  t.notOk(cat.isAdapter('chat', [a, b, c]), 'cached until invalidated');
  cat.invalidate();
  t.ok(cat.isAdapter('chat', [a, b, c]));
});

t.test('prefix: matched share of the blocks; applies only with blocks', async (t) => {
  const tb = table([{ matched: 4 }, { matched: 0 }, { matched: 8 }], { totalBlocks: 8 });
  t.strictSame(scores(byName('prefix'), tb), [0.5, 0, 1]);
  t.ok(byName('prefix').appliesTo!(tb));
  t.notOk(byName('prefix').appliesTo!(table([{}], { totalBlocks: 0 })));
});

t.test('queue, running, load: relative to the best unsaturated candidate', async (t) => {
  const c0 = DEFAULT_TUNING.idleCostTokens;
  const tb = table([
    { ahead: 0, running: 3, inFlight: 1 },
    { ahead: 64, running: 1, inFlight: 3 },
    { ahead: 0, running: 0, inFlight: 0, saturated: true },
  ]);
  const q = scores(byName('queue'), tb);
  t.strictSame(q.slice(0, 2), [1, c0 / (64 + c0)]);
  t.strictSame(scores(byName('running'), tb).slice(0, 2), [2 / 4, 1], 'the saturated one (0 running) does not set the minimum');
  t.strictSame(scores(byName('load'), tb).slice(0, 2), [1, 2 / 4]);
  for (const s of [byName('queue'), byName('running'), byName('load')]) t.equal(s.appliesTo, null, `${s.name} applies always`);
});

t.test('kv_cache: 1 − use; stale candidates get the mean of the fresh ones; off with none fresh', async (t) => {
  const tb = table([{ kv: 0.2 }, { kv: 0.6 }, { fresh: false, kv: NaN }, { kv: 0.9, saturated: true }]);
  const s = scores(byName('kv_cache'), tb);
  t.equal(s[0], 0.8);
  t.equal(s[1], 1 - 0.6);
  t.equal(s[2], (0.8 + (1 - 0.6)) / 2, 'the mean over the unsaturated fresh ones');
  t.ok(byName('kv_cache').appliesTo!(tb));
  t.notOk(byName('kv_cache').appliesTo!(table([{ fresh: false, kv: NaN }, { kv: 0.1, saturated: true }])));
  t.strictSame(scores(byName('kv_cache'), table([{ kv: 1.5 }])), [0], 'clamped to [0, 1]');
});

t.test('lora: resident 1, free slot 0.8, waiting 0.6, full 0, unknown 0.5; adapter requests only', async (t) => {
  const eps = [
    endpoint(0, { sig: sig({ loraRunning: ['sql'], maxLoras: 1 }) }),
    endpoint(1, { sig: sig({ loraRunning: ['a'], maxLoras: 2 }) }),
    endpoint(2, { sig: sig({ loraRunning: ['a'], loraWaiting: ['sql'], maxLoras: 1 }) }),
    endpoint(3, { sig: sig({ loraRunning: ['a'], maxLoras: 1 }) }),
    endpoint(4),
  ];
  const tb = table(eps.map((st) => ({ st })), { adapter: 'sql' });
  t.strictSame(scores(byName('lora'), tb), [1, 0.8, 0.6, 0, 0.5]);
  t.ok(byName('lora').appliesTo!(tb));
  t.notOk(byName('lora').appliesTo!(table([{}], { adapter: null })));
});

t.test('every scorer stays in [0, 1] on random tables', async (t) => {
  let s = 7;
  const rnd = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
  let bad = 0;
  for (let n = 0; n < 200; n++) {
    const rows = Array.from({ length: 1 + Math.floor(rnd() * 8) }, (_, i) => {
      const fresh = rnd() < 0.7;
      const st = endpoint(i, { sig: sig({ loraRunning: rnd() < 0.5 ? ['x'] : [], maxLoras: 1 }) });
      return { st, fresh, kv: fresh ? rnd() : NaN, ahead: rnd() * 1e5, running: Math.floor(rnd() * 50), inFlight: Math.floor(rnd() * 20), matched: Math.floor(rnd() * 10), saturated: i > 0 && rnd() < 0.3 };
    });
    const tb = table(rows, { totalBlocks: 10, adapter: rnd() < 0.5 ? 'x' : null });
    for (const sc of SCORERS) {
      if (sc.appliesTo !== null && !sc.appliesTo(tb)) continue;
      scores(sc, tb).forEach((v, i) => {
        if (tb.saturated[i] === 0 && !(v >= 0 && v <= 1)) bad++;
      });
    }
  }
  t.equal(bad, 0);
});

t.test('saturation: either threshold, 0 turns it off; Retry-After fixed or from drain rates', async (t) => {
  t.ok(isSaturated(5, true, 0, 5, 0.8));
  t.notOk(isSaturated(4, true, 0.79, 5, 0.8));
  t.ok(isSaturated(0, true, 0.8, 5, 0.8));
  t.notOk(isSaturated(0, false, 0.9, 5, 0.8), 'stale KV use is not read');
  t.notOk(isSaturated(99, true, 1, 0, 0), 'both off');
  const tb = table([{ waiting: 9, st: endpoint(0, { drainRate: 4 }) }, { waiting: 7 }]);
  // (9 − 5 + 1) / 4 → 2 s; (7 − 5 + 1) / 1 (no rate measured: 1/s assumed) → 3 s
  t.equal(retryAfterS(tb, { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' }), 2);
  t.equal(retryAfterS(tb, { queue_depth: 5, kv_cache: 0.8, retry_after: 7000 }), 7);
  t.equal(retryAfterS(tb, { queue_depth: 5, kv_cache: 0.8, retry_after: 10 }), 1, 'at least a second');
  tb.queued[0] = 500;
  tb.queued[1] = 500;
  t.equal(retryAfterS(tb, { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' }), 60, 'at most a minute');
  t.equal(retryAfterS(table([{ kv: 0.9 }]), { queue_depth: 0, kv_cache: 0.8, retry_after: 'auto' }), 1, 'KV only: look again in a second');
});

t.test('the candidate table: figures per row, aggregates over the unsaturated rows only', async (t) => {
  const opts = { ...DEFAULT_POOL_OPTIONS, saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' as const } };
  const now = 10_000;
  const a = endpoint(0, { sig: sig({ waiting: 1, running: 4, kvUsage: 0.5 }), sigAt: now, inFlight: 2 });
  const b = endpoint(1, { sig: sig({ waiting: 9, running: 0, kvUsage: 0.1 }), sigAt: now, inFlight: 0 }); // saturated (queue)
  const c = endpoint(2, { sig: sig({ running: 7, kvUsage: 0.3 }), sigAt: now - 5_000, inFlight: 1, decoding: 1 }); // stale
  const match = new Int32Array([3, 8, 0]);
  const tb = new CandidateTable(DEFAULT_TUNING);
  t.equal(tb.build([a, b, c], match, opts, 1000, 4, now), false);
  t.equal(tb.n, 3);
  t.strictSame([...tb.fresh.slice(0, 3)], [1, 1, 0]);
  t.strictSame([...tb.saturated.slice(0, 3)], [0, 1, 0]);
  t.strictSame([...tb.running.slice(0, 3)], [4, 0, 1], 'stale: our own decoding count');
  t.strictSame([0, 1, 2].map((i) => tb.uncachedAt(i)), [1000 - (3 * 64) / 4, 1000 - (8 * 64) / 4, 1000]);
  t.strictSame([0, 1, 2].map((i) => tb.waitingAt(i)), [1, 9, 0], 'stale: our pending requests less the head one');
  t.ok(Number.isNaN(tb.kv[2]), 'stale KV use is unknown');
  t.equal(tb.minRunning, 1, 'the saturated row (0 running) does not count');
  t.equal(tb.minInFlight, 1);
  t.equal(tb.freshCount, 1);
  t.equal(tb.freshKvFree, 0.5);
  t.equal(tb.minCost, Math.min(tb.cost[0], tb.cost[2]));
  b.sig = sig({ waiting: 9 });
  a.sig = sig({ waiting: 9 });
  c.sigAt = now;
  c.sig = sig({ waiting: 6 });
  t.equal(tb.build([a, b, c], match, opts, 1000, 4, now), true, 'every row saturated');
});
