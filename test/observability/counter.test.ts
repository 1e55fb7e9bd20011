import t from 'tap';
import client from 'prom-client';
import { FastCounter } from '../../src/observability/histogram.js';

t.test('FastCounter exports exactly what prom-client\'s Counter exports for the same increments', async (t) => {
  for (const contentType of [client.Registry.PROMETHEUS_CONTENT_TYPE, client.Registry.OPENMETRICS_CONTENT_TYPE]) {
    const ours = new client.Registry(contentType as never);
    const theirs = new client.Registry(contentType as never);
    const a = new FastCounter('x_total', 'Help text.', ['model', 'pool', 'code'], [ours]);
    const b = new client.Counter({ name: 'x_total', help: 'Help text.', labelNames: ['model', 'pool', 'code'], registers: [theirs] });
    for (let i = 0; i < 300; i++) {
      const model = i % 3 === 0 ? 'llama' : 'qwen "q"\\\n'; // label values that need escaping
      const pool = i % 2 === 0 ? 'p1' : 'p2';
      const code = i % 7 === 0 ? '502' : '200';
      const by = i % 5 === 0 ? 3 : 1;
      a.labels(model, pool, code).inc(by);
      b.labels(model, pool, code).inc(by);
    }
    t.equal(await ours.metrics(), await theirs.metrics(), `same exposition text (${contentType.split(';')[0]})`);
    t.equal(JSON.stringify(await ours.getMetricsAsJSON()), JSON.stringify(await theirs.getMetricsAsJSON()), 'same JSON');
  }
  const r = new client.Registry();
  const a = new FastCounter('y_total', 'Help.', ['pool'], [r]);
  const s = a.labels('p');
  s.inc(Number.NaN); // ignored, never throws
  s.inc(-1);
  s.inc();
  t.match(await r.metrics(), /y_total\{pool="p"\} 1\n/, 'only valid increments count');
  a.remove('p');
  t.notMatch(await r.metrics(), /y_total\{/, 'a removed series is gone');
  t.throws(() => a.labels('p', 'q'), /expected 1 label values/);
  t.throws(() => new FastCounter('y_total', 'again', [], [r]), /already been registered/);
});
