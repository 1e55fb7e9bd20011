/**
 * The HTML report of a policy comparison (`npm run bench -- policies` and `infergate simulate --html`): one
 * self-contained file (inline CSS and SVG; no script, no network) that fits a laptop screen. From the top:
 * a verdict (which policy has the most goodput at the first latency objective, by how much, whether the
 * run is valid), a warning when a policy shed a large share, the figures with each column's best and worst
 * marked, the live-vs-simulated agreement in a neutral style of its own (agreement is not "better"), the
 * offered-TTFT CDF (shed and failed requests never arrive, so a policy's curve tops out at its attainment),
 * and, for live runs, each endpoint's load over time. Pure: input in, HTML string out.
 */
import { headlineOf } from '../sim/slo.js';
import type { RunFigures, Summary } from '../sim/types.js';
import { cdfPoints, escapeXml, lineChart, type Series } from './svg.js';

export interface ReportPolicy {
  /** the figures shown for this policy (live, in engine time, or simulated) */
  run: RunFigures;
  /** per offered request, TTFT in ms; Infinity (or NaN) for a request that was shed or failed */
  ttftOfferedMs?: ArrayLike<number>;
  /** live runs: the load generator's own lag (a run whose client fell behind is not valid) */
  lag?: { p99_ms: number; valid: boolean };
  /** live runs: per endpoint, what it served and how busy it was */
  perEndpoint?: Array<{ endpoint: string; requests: number; mean_running: number; max_running: number; mean_kv_cache: number; busy_fraction: number }>;
  /** live runs: per endpoint, [t_s, running, waiting, kv] samples */
  timeseries?: Record<string, Array<[number, number, number, number]>>;
}

export interface Agreement { policy: string; metric: string; live: number; simulated: number; ratio: number | null; within_20pct: boolean | null }

export interface ReportInput {
  title: string;
  /** one paragraph under the verdict: where the figures come from and their units (plain text) */
  about: string;
  policies: ReportPolicy[];
  valid: boolean;
  invalidReason?: string;
  /** policies that are yardsticks, not candidates (the simulator's oracle): shown, never the winner */
  yardsticks?: readonly string[];
  /** live runs against the simulator: ratio per policy and metric */
  agreement?: Agreement[];
  /** live runs: the mocks' time scale (the load charts' time axis is real s × this) */
  timeScale?: number;
  settings: Record<string, unknown>;
}

/** Above this share of rejected requests a policy's latency percentiles flatter it: the report says so. */
export const SHED_WARNING_SHARE = 0.1;

const e = escapeXml;

function num(v: number | null | undefined, digits = 2): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  return String(Math.round(v * 10 ** digits) / 10 ** digits);
}

function pct(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '-' : `${(v * 100).toFixed(1)}%`;
}

function msText(v: number): string {
  return v >= 1000 ? `${num(v / 1000, 2)} s` : `${num(v, 0)} ms`;
}

/** A column of the figures table: how to read a run, and which direction is better (none: not marked). */
interface Column { head: string; group: string; get: (r: RunFigures) => number | null | undefined; better?: 'low' | 'high'; show?: (v: number | null | undefined) => string }

const s = (f: (r: RunFigures) => Summary, k: keyof Summary) => (r: RunFigures): number => f(r)[k];

function columns(sloLabel: string | null): Column[] {
  const cols: Column[] = [
    { head: 'done', group: 'requests', get: (r) => r.completed, show: (v) => num(v, 0) },
    { head: 'shed', group: 'requests', get: (r) => (r.requests ? r.rejected / r.requests : 0), better: 'low', show: (v) => pct(v ?? undefined) },
    { head: 'failed', group: 'requests', get: (r) => r.errors, better: 'low', show: (v) => num(v, 0) },
  ];
  if (sloLabel) {
    cols.push(
      { head: 'goodput/s', group: sloLabel, get: (r) => headlineOf(r.slo)?.goodput_rps, better: 'high' },
      { head: 'attained', group: sloLabel, get: (r) => headlineOf(r.slo)?.attainment, better: 'high', show: (v) => pct(v ?? undefined) },
      { head: 'p50', group: 'TTFT, offered, ms', get: (r) => r.ttft_offered_ms?.p50 ?? Infinity, better: 'low', show: (v) => (v === Infinity ? 'shed' : num(v, 0)) },
      { head: 'p99', group: 'TTFT, offered, ms', get: (r) => r.ttft_offered_ms?.p99 ?? Infinity, better: 'low', show: (v) => (v === Infinity ? 'shed' : num(v, 0)) },
    );
  }
  cols.push(
    { head: 'p50', group: 'TTFT (done), ms', get: s((r) => r.ttft_ms, 'p50'), better: 'low', show: (v) => num(v, 0) },
    { head: 'p99', group: 'TTFT (done), ms', get: s((r) => r.ttft_ms, 'p99'), better: 'low', show: (v) => num(v, 0) },
    { head: 'p50', group: 'ITL ms', get: s((r) => r.itl_ms, 'p50'), better: 'low', show: (v) => num(v, 1) },
    { head: 'p99', group: 'ITL ms', get: s((r) => r.itl_ms, 'p99'), better: 'low', show: (v) => num(v, 1) },
    { head: 'req p99', group: 'ITL ms', get: (r) => r.itl_per_request_ms?.mean.p99, better: 'low', show: (v) => (v === undefined || v === null ? '-' : num(v, 1)) },
    { head: 'p50', group: 'e2e ms', get: s((r) => r.e2e_ms, 'p50'), better: 'low', show: (v) => num(v, 0) },
    { head: 'p99', group: 'e2e ms', get: s((r) => r.e2e_ms, 'p99'), better: 'low', show: (v) => num(v, 0) },
    { head: 'req/s', group: 'throughput', get: (r) => r.throughput_rps, better: 'high' },
    { head: 'tok/s', group: 'throughput', get: (r) => r.output_tokens_per_s, better: 'high', show: (v) => num(v, 0) },
    { head: 'hits', group: 'prefix cache', get: (r) => r.prefix_cache_hit_rate, better: 'high', show: (v) => pct(v ?? undefined) },
  );
  return cols;
}

function sloLabelOf(runs: RunFigures[]): string | null {
  const slo = headlineOf(runs.find((r) => r.slo?.length)?.slo);
  return slo ? `at TTFT ≤ ${msText(slo.ttft_ms)}, ITL ≤ ${msText(slo.itl_ms)}` : null;
}

/** The verdict line: the policy with the most goodput at the headline SLO (or throughput without SLO figures). */
export function verdict(inp: ReportInput): { text: string; winner: string | null } {
  const yard = new Set(inp.yardsticks ?? []);
  const runs = inp.policies.map((p) => p.run);
  const label = sloLabelOf(runs);
  const score = (r: RunFigures): number => (label ? headlineOf(r.slo)?.goodput_rps ?? 0 : r.throughput_rps);
  const what = label ? `goodput ${label}` : 'throughput';
  const ranked = runs.filter((r) => !yard.has(r.policy)).sort((a, b) => score(b) - score(a));
  const validity = inp.valid ? 'The run is valid.' : `The run is NOT valid: ${inp.invalidReason ?? 'see below'}.`;
  if (ranked.length === 0) return { text: `No policy ran. ${validity}`, winner: null };
  const [best, second] = ranked;
  let text: string;
  if (!second) {
    text = `${best.policy}: ${num(score(best))} req/s ${what}.`;
  } else if (score(best) === score(second)) {
    text = `${best.policy} and ${second.policy} tie on ${what} (${num(score(best))} req/s).`;
  } else {
    const gain = score(second) > 0 ? `${((score(best) / score(second) - 1) * 100).toFixed(1)}% more than` : 'against';
    text = `${best.policy} wins on ${what}: ${num(score(best))} req/s, ${gain} ${second.policy} (${num(score(second))} req/s).`;
  }
  for (const r of runs.filter((x) => yard.has(x.policy))) text += ` The ${r.policy} (a yardstick, not a policy to deploy) reaches ${num(score(r))} req/s.`;
  return { text: `${text} ${validity}`, winner: best.policy };
}

/** Best and worst value of a column among the candidates (undefined when they do not differ). */
function extremes(col: Column, runs: RunFigures[], yard: Set<string>): { best: number; worst: number } | undefined {
  if (!col.better) return undefined;
  const vals = runs.filter((r) => !yard.has(r.policy)).map((r) => col.get(r)).filter((v): v is number => typeof v === 'number' && !Number.isNaN(v));
  if (vals.length < 2) return undefined;
  const lo = Math.min(...vals);
  const hi = Math.max(...vals);
  if (lo === hi) return undefined;
  return col.better === 'low' ? { best: lo, worst: hi } : { best: hi, worst: lo };
}

function figuresTable(inp: ReportInput, yard: Set<string>): string {
  const runs = inp.policies.map((p) => p.run);
  const cols = columns(sloLabelOf(runs));
  const groups: Array<{ name: string; span: number }> = [];
  for (const c of cols) {
    const last = groups[groups.length - 1];
    if (last && last.name === c.group) last.span++;
    else groups.push({ name: c.group, span: 1 });
  }
  const ext = cols.map((c) => extremes(c, runs, yard));
  const body = runs.map((r) => {
    const cells = cols.map((c, j) => {
      const v = c.get(r);
      const x = ext[j];
      const cls = x && !yard.has(r.policy) && v === x.best ? 'better' : x && !yard.has(r.policy) && v === x.worst ? 'worse' : '';
      return `<td${cls ? ` class="${cls}"` : ''}>${e(c.show ? c.show(v) : num(v))}</td>`;
    });
    const lag = inp.policies.find((p) => p.run === r)?.lag;
    const name = `${e(r.policy)}${yard.has(r.policy) ? ' <small>(yardstick)</small>' : ''}${lag && !lag.valid ? ' <small class="worse">(invalid: client lag)</small>' : ''}`;
    return `<tr><th>${name}</th>${cells.join('')}</tr>`;
  });
  return `<div class="wide"><table class="figures"><thead><tr><th rowspan="2">policy</th>${groups.map((g) => `<th colspan="${g.span}">${e(g.name)}</th>`).join('')}</tr>
<tr>${cols.map((c) => `<th>${e(c.head)}</th>`).join('')}</tr></thead>
<tbody>${body.join('\n')}</tbody></table></div>
<p class="note">Green: the best value of its column among the candidate policies; red: the worst. "TTFT (done)" counts
completed requests only; "TTFT, offered" counts every request, a shed or failed one as never served ("shed": the
percentile falls on one). ITL p50 and p99 pool every gap between tokens; "req p99" is the 99th percentile over
requests of each one's mean gap (what the objective's ITL bound judges). Throughput is completions per second;
goodput counts only those within the objective.</p>`;
}

function agreementTable(rows: Agreement[]): string {
  const policies = [...new Set(rows.map((r) => r.policy))];
  const metrics = [...new Set(rows.map((r) => r.metric))];
  const cell = (p: string, m: string): string => {
    const a = rows.find((r) => r.policy === p && r.metric === m);
    if (!a || a.ratio === null) return '<td>-</td>';
    return `<td class="${a.within_20pct ? 'agree' : 'apart'}" title="live ${num(a.live)} / simulated ${num(a.simulated)}">${num(a.ratio)}${a.within_20pct ? '' : ' ≠'}</td>`;
  };
  return `<div class="wide"><table class="agreement"><thead><tr><th>policy</th>${metrics.map((m) => `<th>${e(m)}</th>`).join('')}</tr></thead>
<tbody>${policies.map((p) => `<tr><th>${e(p)}</th>${metrics.map((m) => cell(p, m)).join('')}</tr>`).join('\n')}</tbody></table></div>
<p class="note">Live ÷ simulated for the same workload; "≠" marks a ratio outside ±20%. This says how well the
simulator models the live system, not which policy is better.</p>`;
}

function shedWarning(runs: RunFigures[]): string {
  const heavy = runs.filter((r) => r.requests > 0 && r.rejected / r.requests > SHED_WARNING_SHARE);
  if (!heavy.length) return '';
  const list = heavy.map((r) => `${r.policy} ${pct(r.rejected / r.requests)}`).join(', ');
  return `<p class="warnbox">Warning: a large share of requests was rejected (${e(list)}). Latency percentiles over
completed requests flatter a policy that sheds more: compare goodput and TTFT over offered requests.</p>`;
}

export function renderReport(inp: ReportInput): string {
  const yard = new Set(inp.yardsticks ?? []);
  const v = verdict(inp);
  const runs = inp.policies.map((p) => p.run);
  const cdf: Series[] = inp.policies
    .filter((p) => p.ttftOfferedMs && p.ttftOfferedMs.length)
    .map((p) => {
      const all = Array.from(p.ttftOfferedMs!);
      const served = all.filter((x) => Number.isFinite(x));
      // the CDF over offered requests: y = share of all requests served within x
      const pts = cdfPoints(served).map(([x, y]) => [x, (y * served.length) / all.length] as [number, number]);
      return { name: p.run.policy, points: pts };
    });
  const cdfChart = cdf.length
    ? `<h2>Time to first token, over offered requests</h2><figure>${lineChart(cdf, { title: 'TTFT CDF (a curve ends below 1 by the share shed or failed)', xLabel: 'TTFT (ms, log scale)', yLabel: 'share of offered requests', xLog: true, yMin: 0, yMax: 1, width: 900, height: 360 })}</figure>`
    : '';
  const X = inp.timeScale ?? 1;
  const load = inp.policies
    .filter((p) => p.timeseries && Object.keys(p.timeseries).length)
    .map((p) => {
      const ts = Object.entries(p.timeseries!);
      const loadSeries: Series[] = ts.map(([ep, pts]) => ({ name: ep, step: true, points: pts.map(([t, run, wait]) => [t * X, run + wait] as [number, number]) }));
      const kvSeries: Series[] = ts.map(([ep, pts]) => ({ name: ep, step: true, points: pts.map(([t, , , kv]) => [t * X, kv] as [number, number]) }));
      const eps = p.perEndpoint ?? [];
      const table = eps.length
        ? `<table><thead><tr><th>endpoint</th><th>requests served</th><th>mean running</th><th>max running</th><th>mean KV usage</th><th>busy share</th></tr></thead><tbody>${eps.map((x) => `<tr><th>${e(x.endpoint)}</th><td>${x.requests}</td><td>${num(x.mean_running)}</td><td>${x.max_running}</td><td>${pct(x.mean_kv_cache)}</td><td>${pct(x.busy_fraction)}</td></tr>`).join('')}</tbody></table>`
        : '';
      return `<h3>${e(p.run.policy)}</h3><figure>${lineChart(loadSeries, { title: `${p.run.policy}: load per endpoint (running + waiting)`, xLabel: 'time since first request (engine s)', yLabel: 'requests', yMin: 0, width: 900, height: 260 })}</figure>
<figure>${lineChart(kvSeries, { title: `${p.run.policy}: KV cache usage per endpoint`, xLabel: 'time since first request (engine s)', yLabel: 'KV cache usage', yMin: 0, yMax: 1, width: 900, height: 220 })}</figure>${table}`;
    });
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${e(inp.title)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:20px auto;padding:0 16px;color:#222;max-width:1180px}
h1{font-size:22px;margin:0 0 10px} h2{font-size:18px;margin:22px 0 6px} h3{font-size:15px}
.verdict{font-size:17px;padding:10px 12px;border-left:6px solid #2b7a3d;background:#eef7f0;margin:8px 0}
.verdict.invalid{border-color:#b3261e;background:#fdecea}
.warnbox{background:#fff4e0;border-left:6px solid #d98e04;padding:8px 12px}
.wide{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:8px 0 6px;font-size:12.5px}
th,td{border:1px solid #ccc;padding:3px 4px;text-align:right;white-space:nowrap}
thead th{background:#f3f3f3;text-align:center} thead tr:first-child th{white-space:normal} tbody th{text-align:left;white-space:normal}
td.better{background:#dff1e4;color:#14532d;font-weight:600} td.worse{background:#fbe3e1;color:#7f1d1d}
small.worse{color:#b3261e}
td.agree{color:#1d4e89} td.apart{color:#1d4e89;font-weight:700;text-decoration:underline dotted}
.note{font-size:12px;color:#555;margin:2px 0 12px}
pre{background:#f7f7f7;padding:8px;font-size:12px;overflow:auto}
figure{margin:10px 0} svg{max-width:100%;height:auto}
</style></head><body>
<h1>${e(inp.title)}</h1>
<p class="verdict${inp.valid ? '' : ' invalid'}" id="verdict">${e(v.text)}</p>
${shedWarning(runs)}
<p>${e(inp.about)}</p>
<h2>Figures</h2>
${figuresTable(inp, yard)}
${inp.agreement?.length ? `<h2>Live against simulated</h2>${agreementTable(inp.agreement)}` : ''}
${cdfChart}
${load.length ? `<h2>Load per endpoint over time</h2>${load.join('\n')}` : ''}
<h2>Settings</h2>
<pre>${e(JSON.stringify(inp.settings, null, 2))}</pre>
</body></html>
`;
}
