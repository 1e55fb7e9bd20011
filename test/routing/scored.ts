import t from 'tap';
import { seq } from '../helpers/routing.js';
import { Router, PrefixIndex, hashPrefixBlocks, type EndpointSignals, type Ticket } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const EPS = ['e0:1', 'e1:1', 'e2:1', 'e3:1'];
const SYSTEM = 'You are a helpful assistant. '.repeat(600); // ~17k chars
const req = (suffix: string, model = 'm') => ({ model, promptText: SYSTEM + suffix, promptTokens: Math.ceil((SYSTEM.length + suffix.length) / 4) });

function fresh(r: Router, now: number, o: Partial<EndpointSignals> = {}) {
  for (const e of EPS) r.updateSignals(e, sig(o), now);
}

t.test('same prefix sticks to one endpoint while load is even', async (t) => {
  const r = Router.fromPool('p', {}, EPS, { random: seq(7) });
  const hit = new Map<string, number>();
  for (let i = 0; i < 40; i++) {
    fresh(r, i * 10);
    const res = r.pick('p', req(`question ${i}`), i * 10);
    if (res.kind !== 'ok') throw new Error(res.kind);
    hit.set(res.endpoint, (hit.get(res.endpoint) ?? 0) + 1);
    r.onFirstByte(res.ticket, i * 10 + 2);
    r.onEnd(res.ticket, i * 10 + 5, 'ok');
  }
  t.equal(hit.size, 1, `one endpoint: ${JSON.stringify([...hit])}`);
  // different prefixes spread instead
  const r2 = Router.fromPool('p', {}, EPS, { random: seq(9) });
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const res = r2.pick('p', { model: 'm', promptText: `${i} `.repeat(3000), promptTokens: 2000 }, i);
    if (res.kind === 'ok') seen.add(res.endpoint);
  }
  t.equal(seen.size, 4);
});

t.test('a burst sharing one long prefix spreads once queues build (accounting only)', async (t) => {
  const r = Router.fromPool('p', { saturation: { queue_depth: 1000 } }, EPS, { random: seq(3) });
  fresh(r, 0);
  const count = new Map<string, number>();
  for (let i = 0; i < 50; i++) {
    const res = r.pick('p', req(`burst ${i}`), 1, { explain: i === 10 });
    if (res.kind !== 'ok') throw new Error(res.kind);
    count.set(res.endpoint, (count.get(res.endpoint) ?? 0) + 1);
    if (i === 10) t.ok(res.explain && res.explain.candidates.length === 4 && res.explain.winner === res.endpoint, 'explained');
  }
  t.equal(count.size, 4, `all endpoints used: ${JSON.stringify([...count])}`);
  const max = Math.max(...count.values());
  t.ok(max <= 20, `no pile-up: max ${max} of 50`);
});

t.test('an endpoint whose metrics stop is scored on accounting; all stale never fails', async (t) => {
  const r = Router.fromPool('p', { metrics: { stale_after: '1s' } }, EPS, { random: seq(5) });
  fresh(r, 0);
  // e0 goes silent; the others keep reporting
  for (let now = 100; now < 3000; now += 100) {
    for (const e of EPS.slice(1)) r.updateSignals(e, sig({ waiting: 0, running: 2 }), now);
    r.signalsFailed('e0:1', now);
  }
  const dbg = r.debugPools(3000) as any;
  t.equal(dbg.p.endpoints[0].stale, true);
  t.equal(dbg.p.endpoints[0].eligible, true);
  const seen = new Set<string>();
  const held = [];
  for (let i = 0; i < 20; i++) {
    const res = r.pick('p', { model: 'm', promptText: `x${i} `.repeat(400), promptTokens: 400 }, 3000);
    t.equal(res.kind, 'ok');
    if (res.kind === 'ok') {
      seen.add(res.endpoint);
      held.push(res.ticket);
    }
  }
  t.ok(seen.has('e0:1'), 'stale endpoint still used');
  for (const h of held) r.onEnd(h, 3001, 'ok');
  // every endpoint stale: still picks (falls back to own accounting)
  const res = r.pick('p', req('late'), 100_000);
  t.equal(res.kind, 'ok');
});

t.test('LoRA requests prefer pods with the adapter resident, and skip pods without it', async (t) => {
  const r = Router.fromPool('p', {}, EPS, { random: seq(11) });
  r.updateSignals('e0:1', sig({ loraRunning: [], maxLoras: 2, adapters: ['sql'] }), 0);
  r.updateSignals('e1:1', sig({ loraRunning: ['sql', 'chat'], maxLoras: 2, adapters: ['sql', 'chat'] }), 0);
  r.updateSignals('e2:1', sig({ loraRunning: ['a', 'b'], maxLoras: 2, adapters: ['sql', 'a', 'b'] }), 0);
  r.updateSignals('e3:1', sig({ adapters: [] }), 0);
  const res = r.pick('p', { model: 'sql', promptText: 'hi', promptTokens: 1 }, 1, { explain: true });
  t.equal(res.kind === 'ok' && res.endpoint, 'e1:1');
  if (res.kind === 'ok') {
    t.ok(res.explain!.filtered.some((f) => f.endpoint === 'e3:1'), 'e3 does not serve sql');
    const byEp = Object.fromEntries(res.explain!.candidates.map((c) => [c.endpoint, c.scores.lora]));
    t.same(byEp, { 'e0:1': 0.8, 'e1:1': 1, 'e2:1': 0 });
  }
  // base-model requests are not LoRA-scored
  const base = r.pick('p', { model: 'm', promptText: 'hi', promptTokens: 1 }, 1, { explain: true });
  t.ok(base.kind === 'ok' && base.explain!.candidates.every((c) => c.scores.lora === undefined));
});

t.test('saturation returns saturated with retryAfter, for every policy', async (t) => {
  const r = Router.fromPool('p', { saturation: { queue_depth: 5, kv_cache: 0.8 } }, EPS, { random: seq(2) });
  r.updateSignals('e0:1', sig({ waiting: 9 }), 0);
  r.updateSignals('e1:1', sig({ kvUsage: 0.95 }), 0);
  r.updateSignals('e2:1', sig({ waiting: 5 }), 0);
  r.updateSignals('e3:1', sig({ waiting: 1 }), 0);
  const ok = r.pick('p', req('a'), 1);
  t.equal(ok.kind === 'ok' && ok.endpoint, 'e3:1', 'scored avoids saturated endpoints');
  r.updateSignals('e3:1', sig({ waiting: 7 }), 2);
  for (const policy of ['scored', 'round_robin', 'least_request', 'random'] as const) {
    const res = r.pick('p', req('b'), 3, { policy });
    t.equal(res.kind, 'saturated', policy);
    if (res.kind === 'saturated') t.ok(res.retryAfterS >= 1 && res.retryAfterS <= 60);
  }
  const fixed = Router.fromPool('p', { saturation: { queue_depth: 1, retry_after: '7s' } }, ['a:1'], {});
  fixed.updateSignals('a:1', sig({ waiting: 3 }), 0);
  const res = fixed.pick('p', req('c'), 1);
  t.same(res.kind === 'saturated' && res.retryAfterS, 7);
  // own accounting alone saturates too (no metrics at all), on evidence: in flight beyond a known batch
  // capacity (max_num_seqs 1: from the 2nd request on each waits) …
  const own = Router.fromPool('p', { saturation: { queue_depth: 2 }, max_num_seqs: 1 }, ['a:1'], {});
  const kinds = [];
  for (let i = 0; i < 5; i++) kinds.push(own.pick('p', req(`${i}`), 0).kind);
  t.same(kinds, ['ok', 'ok', 'ok', 'saturated', 'saturated']);
  // … or requests long without a first byte; a capacity unknown and nothing overdue yet admits them all
  const unknown = Router.fromPool('p', { saturation: { queue_depth: 2 } }, ['a:1'], {});
  const early = [];
  for (let i = 0; i < 5; i++) early.push(unknown.pick('p', req(`${i}`), 0).kind);
  t.same(early, ['ok', 'ok', 'ok', 'ok', 'ok']);
  t.equal(unknown.pick('p', req('late'), 60_000).kind, 'saturated', 'five requests a minute without a first byte');
});

t.test('two models never share prefix entries', async (t) => {
  const r = Router.fromPool('p', {}, EPS, { random: seq(4) });
  fresh(r, 0);
  const a = r.pick('p', req('same', 'model-a'), 1);
  if (a.kind === 'ok') r.onEnd(a.ticket, 2, 'ok');
  const b = r.pick('p', req('same', 'model-b'), 3, { explain: true });
  t.ok(b.kind === 'ok' && b.explain!.candidates.every((c) => c.matchedBlocks === 0), 'no match across models');
  const a2 = r.pick('p', req('same', 'model-a'), 4, { explain: true });
  t.ok(a2.kind === 'ok' && a2.explain!.candidates.some((c) => c.matchedBlocks > 0), 'same model matches');
});

t.test('index: capacity evicts LRU leaf-first, removed endpoints purged, memory reported', async (t) => {
  const idx = new PrefixIndex({ capacityPerEndpoint: 10 });
  const a = hashPrefixBlocks('a'.repeat(64 * 6), 64, 's', 100);
  const b = hashPrefixBlocks('b'.repeat(64 * 6), 64, 's', 100);
  const out = new Int32Array(4);
  idx.insert(a, 0, 1);
  idx.insert(b, 0, 2); // 12 > 10: a's two deepest blocks go
  t.equal(idx.blocksOf(0), 10);
  idx.match(a, [0], out);
  t.equal(out[0], 4, 'a keeps its first 4 blocks');
  idx.match(b, [0], out);
  t.equal(out[0], 6);
  idx.insert(a.subarray(0, 2), 0, 3); // touch a's root: now b's leaves are oldest
  idx.insert(hashPrefixBlocks('c'.repeat(64 * 3), 64, 's', 100), 0, 4);
  idx.match(b, [0], out);
  t.ok(out[0] < 6, 'b lost its deepest blocks');
  idx.match(a, [0], out);
  t.ok(out[0] >= 2);
  idx.insert(a, 1, 5);
  idx.match(a, [0, 1], out);
  t.equal(out[1], 6);
  t.ok(idx.stats().approxBytes > 0);
  idx.removeEndpoint(0);
  t.equal(idx.blocksOf(0), 0);
  idx.match(b, [0, 1], out);
  t.same([out[0], out[1]], [0, 0]);
  t.equal(idx.stats().blocks, 6);

  const r = Router.fromPool('p', { prefix: { capacity_blocks_per_endpoint: 50 } }, ['x:1', 'y:1'], { random: seq(1) });
  for (let i = 0; i < 30; i++) r.pick('p', { model: 'm', promptText: `${i}`.padEnd(64 * 20, '.'), promptTokens: 300 }, i);
  t.ok(r.indexStats().blocks <= 100, `bounded: ${r.indexStats().blocks}`);
  r.setEndpoints('p', ['y:1']);
  t.ok(r.indexStats().blocks <= 50, 'removed endpoint purged');
  t.same(r.endpoints('p'), ['y:1']);
});

t.test('capacity from vllm:cache_config_info when the config leaves the default', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1'], {});
  r.updateSignals('x:1', sig({ blockSize: 16, numGpuBlocks: 100 }), 0);
  const d = r.debugPools(0) as any;
  t.equal(d.p.endpoints[0].index_capacity, 100, '100 blocks × 16 tokens × 4 chars / 64');
});

t.test('errors eject an endpoint for a while; all ejected still routes', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1', 'y:1'], { random: seq(1) });
  for (let i = 0; i < 3; i++) {
    const res = r.pick('p', { model: 'm', promptText: '', promptTokens: 1, exclude: new Set(['y:1']) }, 0);
    if (res.kind === 'ok') r.onEnd(res.ticket, 1, 'error');
  }
  for (let i = 0; i < 5; i++) {
    const res = r.pick('p', { model: 'm', promptText: '', promptTokens: 1 }, 10);
    t.equal(res.kind === 'ok' && res.endpoint, 'y:1');
    if (res.kind === 'ok') r.onEnd(res.ticket, 11, 'ok');
  }
  const only = r.pick('p', { model: 'm', promptText: '', promptTokens: 1, exclude: new Set(['y:1']) }, 10);
  t.equal(only.kind === 'ok' && only.endpoint, 'x:1', 'never fail closed on our own ejection');
  const later = r.pick('p', { model: 'm', promptText: '', promptTokens: 1, exclude: new Set(['y:1']) }, 10_000);
  t.equal(later.kind, 'ok');
});

t.test('dryRun does not account', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1'], {});
  const res = r.pick('p', req('a'), 0, { dryRun: true, policy: 'least_request' });
  t.equal(res.kind, 'ok');
  t.equal((r.debugPools(0) as any).p.endpoints[0].in_flight, 0);
  t.equal(r.indexStats().blocks, 0);
});

t.test('deferLearn: learning waits for learn(), is never lost, and routes exactly as immediate learning', async (t) => {
  const eps = ['a:1', 'b:1', 'c:1', 'd:1'];
  const mk = () => Router.fromPool('p', {}, eps, { random: () => 0.5 });
  const now = Router.fromPool('p', {}, eps, { random: () => 0.5 });
  const later = mk();
  const prompts = Array.from({ length: 60 }, (_, i) => `${'system prompt '.repeat(40)} user ${i % 7} ${'tail '.repeat(20 + i)}`);
  const a: string[] = [];
  const b: string[] = [];
  const held: Array<[Ticket, Ticket]> = [];
  for (const [i, p] of prompts.entries()) {
    const x = now.pick('p', { model: 'm', promptText: p, promptTokens: p.length / 4 }, i);
    const y = later.pick('p', { model: 'm', promptText: p, promptTokens: p.length / 4 }, i, { deferLearn: true });
    if (x.kind !== 'ok' || y.kind !== 'ok') return t.fail('pick failed');
    a.push(x.endpoint);
    b.push(y.endpoint);
    if (i % 3 === 0) later.learn(y.ticket); // otherwise the next pick learns it first
    held.push([x.ticket, y.ticket]);
    if (held.length > 3) {
      // a few in flight at any time (accounting matters), the oldest finishes
      const [tx, ty] = held.shift()!;
      now.onFirstByte(tx, i);
      later.onFirstByte(ty, i);
      if (i % 2 === 0) {
        now.onEnd(tx, i, 'ok');
        later.onEnd(ty, i, 'ok');
      }
    }
  }
  t.same(b, a, 'same decisions');
  t.equal(later.indexStats().blocks, now.indexStats().blocks, 'same index size (the last pick learned on read)');

  // the learning waits for learn(ticket); a stale ticket's learn() does nothing
  const r = mk();
  const text = 'q'.repeat(64 * 16);
  const first = r.pick('p', { model: 'm', promptText: text, promptTokens: 256 }, 0, { deferLearn: true });
  if (first.kind !== 'ok') return t.fail('pick failed');
  const pool = r.pool('p')!;
  t.equal((pool as unknown as { learnChain: unknown }).learnChain !== null, true, 'pending after pick');
  r.learn(first.ticket);
  t.equal(r.indexStats().blocks, 16, 'learned after learn()');
  const second = r.pick('p', { model: 'm', promptText: 'z'.repeat(64 * 8), promptTokens: 128 }, 1, { deferLearn: true });
  if (second.kind !== 'ok') return t.fail('pick failed');
  r.learn(first.ticket);
  t.equal((pool as unknown as { learnChain: unknown }).learnChain !== null, true, 'an older ticket does not learn the newer pick');
  r.learn(second.ticket);
  t.equal(r.indexStats().blocks, 24);
});
