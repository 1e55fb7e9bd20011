import t from 'tap';
import client from 'prom-client';
import { FastHistogram } from '../../src/observability/histogram.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

t.test('FastHistogram exports exactly what prom-client\'s Histogram exports for the same observations', async (t) => {
  const ours = new client.Registry();
  const theirs = new client.Registry();
  const a = new FastHistogram('x_seconds', 'Help text.', ['model', 'pool'], BUCKETS, [ours]);
  const b = new client.Histogram({ name: 'x_seconds', help: 'Help text.', labelNames: ['model', 'pool'], buckets: BUCKETS, registers: [theirs] });
  let seed = 7;
  const rnd = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296);
  const values = [0, 0.005, 0.0050001, 1, 2.5, 3, 1e9, ...Array.from({ length: 500 }, () => rnd() ** 3 * 4)];
  for (const [i, v] of values.entries()) {
    const model = i % 3 === 0 ? 'llama' : 'qwen "q"\\\n'; // label values that need escaping
    const pool = i % 2 === 0 ? 'p1' : 'p2';
    a.labels(model, pool).observe(v);
    b.labels(model, pool).observe(v);
  }
  t.equal(await ours.metrics(), await theirs.metrics(), 'same exposition text');
  t.equal(JSON.stringify(await ours.getMetricsAsJSON()), JSON.stringify(await theirs.getMetricsAsJSON()), 'same JSON');
  a.labels('llama', 'p1').observe(Number.NaN); // ignored, never throws
  a.reset();
  b.reset();
  t.match(await ours.metrics(), /x_seconds_count\{model="llama",pool="p1"\} 0/, 'reset zeroes the series');
  t.throws(() => a.labels('only-one'), /expected 2 label values/);
  t.throws(() => new FastHistogram('x_seconds', 'again', [], [1], [ours]), /already been registered/);
});
