/**
 * The `policies` report: one self-contained HTML file (inline CSS and hand-written SVG, no network):
 * a validity banner, the figures table (live, engine time) with simulated values and live/sim ratios,
 * the TTFT CDF per policy, and each endpoint's load (running + waiting) over time per policy.
 */
import type { RunFigures } from '../src/sim/types.js';
import { round } from './common.js';
import { cdfPoints, escapeXml, lineChart, type Series } from './svg.js';

export interface ReportRun extends RunFigures {
  lag?: { p99_ms: number; valid: boolean };
  per_endpoint?: Array<{ endpoint: string; requests: number; mean_running: number; max_running: number; mean_kv_cache: number; busy_fraction: number }>;
  timeseries?: Record<string, Array<[number, number, number, number]>>;
  ttft_values_ms?: number[];
}

export interface ReportInput {
  settings: Record<string, unknown>;
  live: ReportRun[];
  sim: Array<Omit<ReportRun, 'per_endpoint' | 'timeseries' | 'lag'>>;
  comparison: Array<{ policy: string; metric: string; live: number; simulated: number; ratio: number | null; within_20pct: boolean | null }>;
  valid: boolean;
  invalidReason?: string;
  timeScale: number;
}

const e = escapeXml;

function cell(v: number | string, cls = ''): string {
  return `<td${cls ? ` class="${cls}"` : ''}>${e(String(typeof v === 'number' ? round(v, 2) : v))}</td>`;
}

export function renderPoliciesReport(inp: ReportInput): string {
  const X = inp.timeScale;
  const rows = inp.live.map((l) => {
    const s = inp.sim.find((x) => x.policy === l.policy);
    const ratio = (metric: string): string => {
      const c = inp.comparison.find((x) => x.policy === l.policy && x.metric === metric);
      if (!c || c.ratio === null) return '<td>-</td>';
      return `<td class="${c.within_20pct ? 'ok' : 'bad'}">${c.ratio}</td>`;
    };
    return `<tr><th>${e(l.policy)}</th>${cell(l.ttft_ms.p50)}${cell(s ? s.ttft_ms.p50 : '-')}${ratio('ttft p50')}${cell(l.ttft_ms.p99)}${cell(s ? s.ttft_ms.p99 : '-')}${ratio('ttft p99')}${cell(l.itl_ms.p50)}${cell(l.itl_ms.p99)}${cell(s ? s.itl_ms.p50 : '-')}${ratio('itl p50')}${cell(l.e2e_ms.p50)}${cell(l.e2e_ms.p99)}${cell(l.throughput_rps)}${cell(s ? s.throughput_rps : '-')}${ratio('throughput rps')}${cell(l.output_tokens_per_s)}${cell(l.prefix_cache_hit_rate)}${cell(s ? s.prefix_cache_hit_rate : '-')}${cell(`${l.completed}/${l.requests}`)}${cell(l.errors, l.errors ? 'bad' : '')}${cell(l.rejected)}${cell(l.lag ? l.lag.p99_ms : '-', l.lag && !l.lag.valid ? 'bad' : '')}</tr>`;
  });
  const table = `<table><thead><tr><th rowspan="2">policy</th><th colspan="3">TTFT p50 ms</th><th colspan="3">TTFT p99 ms</th><th colspan="4">ITL ms</th><th colspan="2">e2e ms</th><th colspan="3">throughput req/s</th><th>tok/s</th><th colspan="2">prefix hit rate</th><th rowspan="2">done</th><th rowspan="2">errors</th><th rowspan="2">429s</th><th rowspan="2">client lag p99 ms (real)</th></tr>
<tr><th>live</th><th>sim</th><th>ratio</th><th>live</th><th>sim</th><th>ratio</th><th>p50</th><th>p99</th><th>sim p50</th><th>ratio</th><th>p50</th><th>p99</th><th>live</th><th>sim</th><th>ratio</th><th>live</th><th>live</th><th>sim</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;

  const ttftSeries: Series[] = inp.live.map((l) => ({ name: `${l.policy} (live)`, points: cdfPoints(l.ttft_values_ms ?? []) }));
  const ttftChart = lineChart(ttftSeries, { title: 'TTFT distribution (CDF), live, engine ms', xLabel: 'TTFT (ms, log scale)', yLabel: 'fraction of requests', xLog: true, yMin: 0, yMax: 1, width: 760, height: 340 });

  const loadCharts = inp.live.map((l) => {
    const series: Series[] = Object.entries(l.timeseries ?? {}).map(([ep, pts]) => ({ name: ep, step: true, points: pts.map(([t, run, wait]) => [t * X, run + wait] as [number, number]) }));
    return lineChart(series, { title: `${l.policy}: load per endpoint (running + waiting)`, xLabel: 'time since first request (engine s)', yLabel: 'requests', yMin: 0, width: 760, height: 260 });
  });
  const kvCharts = inp.live.map((l) => {
    const series: Series[] = Object.entries(l.timeseries ?? {}).map(([ep, pts]) => ({ name: ep, step: true, points: pts.map(([t, , , kv]) => [t * X, kv] as [number, number]) }));
    return lineChart(series, { title: `${l.policy}: KV cache usage per endpoint`, xLabel: 'time since first request (engine s)', yLabel: 'kv cache usage', yMin: 0, yMax: 1, width: 760, height: 220 });
  });
  const epTables = inp.live.map((l) => `<h3>${e(l.policy)}: endpoints</h3><table><thead><tr><th>endpoint</th><th>requests served</th><th>mean running</th><th>max running</th><th>mean KV usage</th><th>busy fraction</th></tr></thead><tbody>${(l.per_endpoint ?? []).map((p) => `<tr><th>${e(p.endpoint)}</th>${cell(p.requests)}${cell(p.mean_running)}${cell(p.max_running)}${cell(p.mean_kv_cache)}${cell(p.busy_fraction)}</tr>`).join('')}</tbody></table>`);

  const banner = inp.valid
    ? '<p class="okbox">Valid run: the load generator kept to its schedule.</p>'
    : `<p class="badbox">INVALID RUN: ${e(inp.invalidReason ?? 'unknown')}</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>infergate policies benchmark</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
thead th{background:#f3f3f3;text-align:center}
td.ok{background:#e6f4ea} td.bad{background:#fde7e7}
.okbox{background:#e6f4ea;padding:8px} .badbox{background:#fde7e7;padding:8px;font-weight:bold}
pre{background:#f7f7f7;padding:8px;font-size:12px;overflow:auto}
figure{margin:12px 0}
</style></head><body>
<h1>infergate: routing policies, live vs simulated</h1>
${banner}
<p>Live figures are measured at the client through the real gateway and mock servers. The mocks run ${X}× faster than real time, so durations are shown in engine time (measured × ${X}) and rates in engine time (measured ÷ ${X}), the simulator's units. Ratios are live/simulated; green within ±20%.</p>
<h2>Figures</h2>
${table}
<h2>TTFT distribution</h2>
<figure>${ttftChart}</figure>
<h2>Load per endpoint over time</h2>
${loadCharts.map((c, i) => `<figure>${c}</figure><figure>${kvCharts[i]}</figure>`).join('\n')}
${epTables.join('\n')}
<h2>Settings</h2>
<pre>${e(JSON.stringify(inp.settings, null, 2))}</pre>
</body></html>
`;
}
