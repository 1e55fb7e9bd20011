// docker/grafana/infergate-dashboard.json must chart metrics that exist: every metric name its PromQL
// queries use is exported by a live gateway's /metrics (a histogram's _bucket/_sum/_count by its family),
// and the labels its queries group by are on those metrics' series.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/process.js';
import { startGateway, startMocks, gatewayConfig, chat, parseProm, longText } from '../e2e/support.js';

interface Panel {
  title?: string;
  type: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}

const dashboard = JSON.parse(readFileSync(join(ROOT, 'docker', 'grafana', 'infergate-dashboard.json'), 'utf8')) as { panels: Panel[]; templating: { list: Array<{ definition?: string }> } };
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const exprs = panels.flatMap((p) => (p.targets ?? []).map((x) => ({ panel: p.title ?? '?', expr: x.expr })));
for (const v of dashboard.templating.list) if (v.definition) exprs.push({ panel: 'variable', expr: v.definition });
const NAME = /\b((?:infergate|process|nodejs)_[a-zA-Z0-9_]+)\b/g;

t.test('the dashboard has queries, each naming our metrics', async (t) => {
  t.ok(panels.filter((p) => p.type !== 'row').length >= 20, 'twenty panels or more');
  for (const { panel, expr } of exprs) t.ok([...expr.matchAll(NAME)].length > 0, `${panel}: ${expr} names a metric`);
});

t.test('every metric and grouping label the dashboard uses exists in a live gateway', async (t) => {
  const mocks = await startMocks(2, ['--model', 'test-model', '--time-scale', '20']);
  t.teardown(() => mocks.kill());
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', shadow_policy: 'round_robin' } }));
  t.teardown(() => gw.stop());
  // traffic, so that labelled series exist: a stream (TTFT and ITL), a repeated prompt (prefix match), a 400
  const prompt = longText('dash', 1_000);
  for (let i = 0; i < 2; i++) {
    const r = await chat(gw.url, { model: 'test-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: prompt }] });
    t.equal(r.status, 200, 'a streamed request');
  }
  t.equal((await chat(gw.url, { model: 'test-model' })).status, 400, 'a rejected request');
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text();
  const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
  const samples = parseProm(text);
  const exported = (name: string): boolean => {
    if (types.has(name)) return types.get(name) !== 'histogram';
    const m = /^(.*)_(bucket|sum|count)$/.exec(name);
    return m !== null && types.get(m[1]) === 'histogram';
  };
  const used = new Set(exprs.flatMap(({ expr }) => [...expr.matchAll(NAME)].map((m) => m[1])));
  t.ok(used.size >= 25, `${used.size} metric names used`);
  for (const name of [...used].sort()) t.ok(exported(name), `${name} is exported`);
  // `by (a, b)` right after sum/count/…: each label is on some series of the metric inside
  for (const { panel, expr } of exprs) {
    for (const m of expr.matchAll(/by \(([^)]*)\) \(\s*(?:rate|increase)?\(?\s*([a-zA-Z_:][a-zA-Z0-9_:]*)/g)) {
      const labels = m[1].split(',').map((s) => s.trim()).filter((l) => l !== 'le');
      const series = samples.filter((s) => s.name === m[2]);
      if (series.length === 0) continue; // no series yet (a counter not touched by this traffic): its name was checked
      for (const l of labels) t.ok(series.some((s) => l in s.labels), `${panel}: ${m[2]} has label ${l}`);
    }
  }
});
