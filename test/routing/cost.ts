import t from 'tap';
import { Router, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const prompt = (tag: string, chars: number) => ({ model: 'm', promptText: `${tag} `.repeat(chars / (tag.length + 1)), promptTokens: chars / 4 });

t.test('queued work ahead shrinks with the head request\'s observed prefill progress', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1'], {});
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
