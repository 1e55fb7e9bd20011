import t from 'tap';
import { Router, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const prompt = (tag: string, chars: number) => ({ model: 'm', promptText: `${tag} `.repeat(chars / (tag.length + 1)), promptTokens: chars / 4 });

t.test('queued work ahead shrinks with the head request\'s observed prefill progress', async (t) => {
  // the backlog bound off: 8000 tokens ahead at 4 tokens/ms (2 s) would saturate this one-endpoint pool
  const r = Router.fromPool('p', { saturation: { max_prefill_backlog: 0 } }, ['x:1'], {});
  // learn x's prefill speed: 4000 uncached tokens took 1000 ms at the head → 4 tokens/ms
  const a = r.pick('p', prompt('warm', 16000), 0);
  if (a.kind !== 'ok') throw new Error(a.kind);
  r.onFirstByte(a.ticket, 1000);
  r.onEnd(a.ticket, 1100, 'ok');
  // a long prefill (8000 tokens) goes to x at t = 2000
  const b = r.pick('p', prompt('long', 32000), 2000);
  if (b.kind !== 'ok') throw new Error(b.kind);
  const costAt = (now: number) => {
    const e = r.pick('p', prompt('probe', 400), now, { dryRun: true, explain: true });
    if (e.kind !== 'ok') throw new Error(e.kind);
    return e.explain!.candidates[0].cost;
  };
  const c0 = costAt(2000);
  const c1 = costAt(3000); // ≈ 4000 tokens done
  const c2 = costAt(5000); // all of it done (never below this request's own work)
  t.ok(c0 > 8000, `all queued at dispatch: ${c0}`);
  t.ok(Math.abs(c0 - c1 - 4000) < 50, `half done after 1 s: ${c0} → ${c1}`);
  t.ok(c2 >= 100 && c2 < c1, `drained: ${c2}`);
});

t.test('fresh metrics: our requests already running are not counted as waiting (no needless 429)', async (t) => {
  const r = Router.fromPool('p', { saturation: { queue_depth: 2, kv_cache: 0 } }, ['x:1'], {});
  for (let i = 0; i < 3; i++) {
    const res = r.pick('p', prompt(`q${i}`, 400), i);
    t.equal(res.kind, 'ok');
  }
  // the scrape sees all three running (chunked prefill took them in one step), none waiting
  r.updateSignals('x:1', sig({ running: 3, waiting: 0 }), 10);
  t.equal(r.pick('p', prompt('next', 400), 11, { dryRun: true }).kind, 'ok');
  // but a queue the scrape shows is respected
  r.updateSignals('x:1', sig({ running: 1, waiting: 2 }), 20);
  t.equal(r.pick('p', prompt('next', 400), 21, { dryRun: true }).kind, 'saturated');
});

t.test('queue scorer counts queued tokens: a few short requests ahead beat one long one', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1', 'y:1'], { random: () => 0.5 });
  r.updateSignals('x:1', sig(), 0);
  r.updateSignals('y:1', sig(), 0);
  // x: three short pending requests; y: one long one (placed with exclude)
  for (let i = 0; i < 3; i++) r.pick('p', { ...prompt(`s${i}`, 400), exclude: new Set(['y:1']) }, 1);
  r.pick('p', { ...prompt('L', 40000), exclude: new Set(['x:1']) }, 1);
  const res = r.pick('p', prompt('new', 400), 2, { dryRun: true, explain: true });
  t.equal(res.kind === 'ok' && res.endpoint, 'x:1', JSON.stringify(res.kind === 'ok' ? res.explain!.candidates.map((c) => [c.endpoint, c.cost, c.scores.queue]) : res));
});

t.test('a finished request the last scrape saw waiting is not counted as someone else\'s queue', async (t) => {
  const r = Router.fromPool('p', { saturation: { queue_depth: 0, kv_cache: 0 } }, ['x:1', 'y:1'], { random: () => 0.5 });
  r.updateSignals('x:1', sig(), 0);
  r.updateSignals('y:1', sig(), 0);
  const a = r.pick('p', { ...prompt('mine', 400), exclude: new Set(['y:1']) }, 1);
  if (a.kind !== 'ok') throw new Error(a.kind);
  // the scrape catches it queued, then it finishes before the next scrape
  r.updateSignals('x:1', sig({ waiting: 1 }), 2);
  r.onFirstByte(a.ticket, 3);
  r.onEnd(a.ticket, 4, 'ok');
  const e = r.pick('p', prompt('probe', 400), 5, { dryRun: true, explain: true });
  if (e.kind !== 'ok') throw new Error(e.kind);
  const cost = Object.fromEntries(e.explain!.candidates.map((c) => [c.endpoint, c.cost]));
  t.ok(Math.abs(cost['x:1'] - cost['y:1']) < 1, `no phantom foreign work on x: ${JSON.stringify(cost)}`);
  // a waiting request that is not ours still counts
  r.updateSignals('x:1', sig({ waiting: 1 }), 6);
  const f = r.pick('p', prompt('probe', 400), 7, { dryRun: true, explain: true });
  if (f.kind !== 'ok') throw new Error(f.kind);
  const c2 = Object.fromEntries(f.explain!.candidates.map((c) => [c.endpoint, c.cost]));
  t.ok(c2['x:1'] > c2['y:1'] + 500, `foreign waiting request on x: ${JSON.stringify(c2)}`);
});

t.test('saturation off: a burst sharing a cached prefix spreads (each request ahead costs a step)', async (t) => {
  const EPS = ['a:1', 'b:1', 'c:1', 'd:1'];
  const r = Router.fromPool('p', { saturation: { queue_depth: 0, kv_cache: 0 } }, EPS, { random: () => 0.3 });
  for (const e of EPS) r.updateSignals(e, sig(), 0);
  const system = 'You are a careful assistant. '.repeat(207); // ≈ 6000 chars, ≈ 1500 tokens
  const body = (i: number) => ({ model: 'm', promptText: `${system}Request ${i}: summarise.`, promptTokens: Math.ceil((system.length + 24) / 4) });
  // one endpoint holds the prefix and has prefilled it fast (so its queued prefill estimate drains at once)
  const w = r.pick('p', body(-1), 1);
  if (w.kind !== 'ok') throw new Error(w.kind);
  r.onFirstByte(w.ticket, 11);
  r.onEnd(w.ticket, 20, 'ok');
  const per = new Map<string, number>();
  for (let i = 0; i < 50; i++) {
    const res = r.pick('p', body(i), 30 + i); // a burst arriving over 50 ms, no first byte yet
    if (res.kind !== 'ok') throw new Error(res.kind);
    per.set(res.endpoint, (per.get(res.endpoint) ?? 0) + 1);
  }
  t.equal(per.size, 4, `all endpoints used: ${JSON.stringify([...per])}`);
  t.ok(per.get(w.endpoint)! <= 25, `warm endpoint took ${per.get(w.endpoint)} of 50`);
  t.ok(per.get(w.endpoint)! >= Math.max(...per.values()), 'the warm endpoint still takes the most');
});

t.test('a full batch (max_num_seqs) makes a request wait for whole decodes', async (t) => {
  const r = Router.fromPool('p', { saturation: { queue_depth: 0, kv_cache: 0 } }, ['x:1', 'y:1'], { random: () => 0.5 });
  r.updateSignals('x:1', sig({ running: 4, waiting: 0, maxNumSeqs: 4 }), 0);
  r.updateSignals('y:1', sig({ running: 3, waiting: 0, maxNumSeqs: 4 }), 0);
  const e = r.pick('p', prompt('probe', 400), 1, { dryRun: true, explain: true });
  if (e.kind !== 'ok') throw new Error(e.kind);
  const cost = Object.fromEntries(e.explain!.candidates.map((c) => [c.endpoint, c.cost]));
  // x: one decode (2 s assumed) / 4 slots = 500 ms ≈ 8000 tokens at the assumed 16 tokens/ms
  t.ok(cost['x:1'] - cost['y:1'] > 7000, JSON.stringify(cost));
  t.equal(e.endpoint, 'y:1');
});

t.test('LoRA: waiting for a slot held by another adapter outweighs one more running sequence', async (t) => {
  const r = Router.fromPool('p', {}, ['A:1', 'B:1'], { random: () => 0.5 });
  const S = (running: number, lora: string) => sig({ running, loraRunning: [lora], maxLoras: 1, adapters: ['a', 'b'] });
  r.updateSignals('A:1', S(0, 'a'), 0);
  r.updateSignals('B:1', S(0, 'b'), 0);
  const ask = (model: string, now: number, exclude?: string) =>
    r.pick('p', { model, promptText: `keep ${model} busy`, promptTokens: 4, exclude: exclude ? new Set([exclude]) : undefined }, now);
  // long streams: two a on A, one b on B (started at t = 10, decoding since 12)
  const held = [ask('a', 10, 'B:1'), ask('a', 10, 'B:1'), ask('b', 10, 'A:1')];
  for (const h of held) if (h.kind === 'ok') r.onFirstByte(h.ticket, 12);
  // short requests already taught both endpoints a short decode time and a slow "prefill speed"
  for (let i = 0; i < 4; i++) {
    for (const [m, ex] of [['a', 'B:1'], ['b', 'A:1']] as const) {
      const s = ask(m, 20 + i * 10, ex);
      if (s.kind !== 'ok') throw new Error(s.kind);
      r.onFirstByte(s.ticket, 22 + i * 10);
      r.onEnd(s.ticket, 25 + i * 10, 'ok');
    }
  }
  r.updateSignals('A:1', S(2, 'a'), 2000);
  r.updateSignals('B:1', S(1, 'b'), 2000);
  const res = r.pick('p', { model: 'a', promptText: 'one more for a', promptTokens: 4 }, 2001, { dryRun: true, explain: true });
  if (res.kind !== 'ok') throw new Error(res.kind);
  t.equal(res.endpoint, 'A:1', JSON.stringify(res.explain!.candidates.map((c) => [c.endpoint, c.cost, c.total])));
  // a free slot costs only the load time: no reason to avoid it
  r.updateSignals('B:1', sig({ running: 1, loraRunning: ['b'], maxLoras: 2, adapters: ['a', 'b'] }), 2002);
  const free = r.pick('p', { model: 'a', promptText: 'one more for a', promptTokens: 4 }, 2003, { dryRun: true, explain: true });
  if (free.kind !== 'ok') throw new Error(free.kind);
  const c = Object.fromEntries(free.explain!.candidates.map((x) => [x.endpoint, x.cost]));
  t.ok(c['B:1'] < 2000, `free slot: ${JSON.stringify(c)}`);
});
