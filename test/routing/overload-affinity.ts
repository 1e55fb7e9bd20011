// Affinity that holds under overload (issue #17): while every candidate has prefill work queued, the scored
// policy credits each endpoint with the prompt tokens its cache saves (Tuning.cacheCredit × those tokens off
// its cost), so the endpoint holding the prefix keeps the request although its queue is somewhat longer: the
// hit is work that no later request waits behind. With a candidate free to start at once, no credit. And an
// endpoint over the KV threshold stays a candidate for a request whose prompt it holds (Tuning.kvHeldShare).
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

/**
 * Two endpoints with a KV cache of 1000 blocks × 16 tokens and the KV test at 0.8; `a` holds the system
 * prompt in its cache. Then the scrape shows each endpoint's KV use.
 */
function kvPool(kvA: number, kvB: number, kvHeldShare?: number): Router {
  const tuning = kvHeldShare === undefined ? {} : { kvHeldShare };
  const r = Router.fromPool('p', { saturation: { queue_depth: 0, kv_cache: 0.8 } }, ['a:1', 'b:1'], { random: () => 0.5, tuning });
  const kv = (kvUsage: number) => sig({ kvUsage, numGpuBlocks: 1000, blockSize: 16 });
  for (const e of ['a:1', 'b:1']) r.updateSignals(e, kv(0.1), 0);
  const first = ok(r.pick('p', { ...withPrefix('warm'), exclude: only('a:1') }, 0));
  r.onFirstByte(first.ticket, 500);
  r.onEnd(first.ticket, 600, 'ok');
  r.updateSignals('a:1', kv(kvA), 900);
  r.updateSignals('b:1', kv(kvB), 900);
  return r;
}

const filteredOut = (r: Router, input: Parameters<Router['pick']>[1]) => {
  const res = r.pick('p', input, 1000, { dryRun: true, explain: true });
  return { kind: res.kind, out: (res.explain?.filtered ?? []).filter((f) => f.why === 'saturated').map((f) => f.endpoint), endpoint: res.kind === 'ok' ? res.endpoint : undefined };
};

t.test('over the KV threshold, an endpoint still takes a request whose prompt it holds, while its free KV has room', async (t) => {
  // a at 0.85: over the threshold, 15% free (2400 tokens); b at 0.3
  const cold = filteredOut(kvPool(0.85, 0.3), plain('cold', 2000));
  t.same(cold.out, ['a:1'], 'a cold prompt: a is saturated, as the threshold says');
  t.equal(cold.endpoint, 'b:1');
  const held = filteredOut(kvPool(0.85, 0.3), withPrefix('question'));
  t.same(held.out, [], 'the prompt a holds (all but its last block): a stays a candidate');
  t.equal(held.endpoint, 'a:1', 'and keeps it (the cache saves the whole prefill)');
  // both over the threshold: the held prompt is admitted on a, a cold one is refused
  const both = kvPool(0.85, 0.9);
  t.equal(filteredOut(both, withPrefix('question')).endpoint, 'a:1', 'every endpoint over the threshold: the held prompt still goes to a');
  t.equal(filteredOut(both, plain('cold', 2000)).kind, 'saturated', 'a cold prompt is refused');
  // no room for even the uncached part (0.9999: under 2 tokens free)
  t.equal(filteredOut(kvPool(0.9999, 0.9), withPrefix('question')).kind, 'saturated', 'a full cache: refused, held or not');
  // kvHeldShare above 1: the threshold alone, as before
  const off = kvPool(0.85, 0.9, 2);
  t.equal(filteredOut(off, withPrefix('question')).kind, 'saturated', 'kvHeldShare 2: every endpoint over the threshold is refused');
});
