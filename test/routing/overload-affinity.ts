// Affinity that holds under overload (issue #17): while every candidate has prefill work queued, the scored
// policy credits each endpoint with the prompt tokens its cache saves (Tuning.cacheCredit × those tokens off
// its cost), so the endpoint holding the prefix keeps the request although its queue is somewhat longer: the
// hit is work that no later request waits behind. With a candidate free to start at once, no credit.
import t from 'tap';
import { Router, type EndpointSignals, type PickResult } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const SYSTEM = 'You are a careful analyst of shipping manifests. '.repeat(640); // ≈ 31k chars, 8k tokens
const withPrefix = (q: string) => ({ model: 'm', promptText: SYSTEM + q, promptTokens: Math.ceil((SYSTEM.length + q.length) / 4) });
const plain = (tag: string, tokens: number) => ({ model: 'm', promptText: `${tag}: `.repeat(40), promptTokens: tokens });
const only = (ep: string) => new Set([ep === 'a:1' ? 'b:1' : 'a:1']);

function ok(r: PickResult): Extract<PickResult, { kind: 'ok' }> {
  if (r.kind !== 'ok') throw new Error(`expected ok, got ${r.kind}`);
  return r;
}

/**
 * Two endpoints; `a` holds the system prompt in its cache (a request with it ran there). Then `aheadA` and
 * `aheadB` prompt tokens of other requests are queued on each (0: none).
 */
function pool(aheadA: number, aheadB: number, cacheCredit?: number): Router {
  const r = Router.fromPool('p', { saturation: { queue_depth: 0, kv_cache: 0 } }, ['a:1', 'b:1'], {
    random: () => 0.5,
    tuning: cacheCredit === undefined ? {} : { cacheCredit },
  });
  for (const e of ['a:1', 'b:1']) r.updateSignals(e, sig(), 0);
  const first = ok(r.pick('p', { ...withPrefix('warm'), exclude: only('a:1') }, 0));
  r.onFirstByte(first.ticket, 500);
  r.onEnd(first.ticket, 600, 'ok');
  if (aheadA > 0) ok(r.pick('p', { ...plain('queued on a', aheadA), exclude: only('a:1') }, 1000));
  if (aheadB > 0) ok(r.pick('p', { ...plain('queued on b', aheadB), exclude: only('b:1') }, 1000));
  return r;
}

const winner = (r: Router) => ok(r.pick('p', withPrefix('question'), 1000, { dryRun: true, explain: true }));

t.test('every candidate loaded: the endpoint whose cache saves the prefill keeps the request', async (t) => {
  // a: 28k tokens queued, b: 8k. Cost on a ≈ 28k + the question; on b ≈ 8k + the whole 8k-token prompt
  const res = winner(pool(28_000, 8_000));
  t.equal(res.endpoint, 'a:1', 'the prefix holder wins');
  const e = res.explain!.candidates;
  const a = e.find((c) => c.endpoint === 'a:1')!;
  const b = e.find((c) => c.endpoint === 'b:1')!;
  t.ok(a.cost > b.cost, `though its estimated TTFT cost is higher (${Math.round(a.cost)} vs ${Math.round(b.cost)})`);
  t.equal(a.loadFactor, 1, 'its credited cost is the least');
  // without the credit the same picture goes to b: load wins, and the prefix is prefilled again elsewhere
  t.equal(winner(pool(28_000, 8_000, 0)).endpoint, 'b:1', 'cacheCredit 0: the less loaded endpoint');
  // far more loaded, the holder gives way: the credit is bounded by what the cache saves
  t.equal(winner(pool(60_000, 8_000)).endpoint, 'b:1', '60k tokens ahead on a: b');
});

t.test('a candidate free to start at once: no credit, the cold prefill goes there', async (t) => {
  const res = winner(pool(20_000, 0));
  t.equal(res.endpoint, 'b:1', 'b has nothing queued');
  const b = res.explain!.candidates.find((c) => c.endpoint === 'b:1')!;
  t.equal(b.loadFactor, 1);
});
