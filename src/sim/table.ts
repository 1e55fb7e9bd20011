/** The compact table `infergate simulate` prints. */
import { headlineOf } from './slo.js';
import type { SimResult } from './types.js';

const COLS: Array<[string, (r: SimResult['runs'][number]) => string]> = [
  ['policy', (r) => r.policy],
  ['done', (r) => String(r.completed)],
  ['err', (r) => String(r.errors)],
  ['rej', (r) => String(r.rejected)],
  ['ttft p50', (r) => ms(r.ttft_ms.p50)],
  ['p90', (r) => ms(r.ttft_ms.p90)],
  ['p99', (r) => ms(r.ttft_ms.p99)],
  ['mean', (r) => ms(r.ttft_ms.mean)],
  ['itl p50', (r) => ms(r.itl_ms.p50)],
  ['p99', (r) => ms(r.itl_ms.p99)],
  ['req p99', (r) => (r.itl_per_request_ms ? ms(r.itl_per_request_ms.mean.p99) : '-')],
  ['e2e p50', (r) => ms(r.e2e_ms.p50)],
  ['p99', (r) => ms(r.e2e_ms.p99)],
  ['req/s', (r) => r.throughput_rps.toFixed(2)],
  ['tok/s', (r) => r.output_tokens_per_s.toFixed(0)],
  ['hit%', (r) => (r.prefix_cache_hit_rate * 100).toFixed(1)],
  ['slo%', (r) => { const s = headlineOf(r.slo); return s ? (s.attainment * 100).toFixed(1) : '-'; }],
  ['good/s', (r) => headlineOf(r.slo)?.goodput_rps.toFixed(2) ?? '-'],
];

function ms(x: number): string {
  if (x >= 100_000) return `${(x / 1000).toFixed(0)}s`;
  if (x >= 10_000) return `${(x / 1000).toFixed(1)}s`;
  if (x >= 100) return x.toFixed(0);
  return x.toFixed(1);
}

export function formatTable(res: SimResult): string {
  const w = res.workload;
  const reps = w.replicas && w.replicas > 1 ? `, ${w.replicas} gateway replicas (${w.spread}, share ${w.share}${w.share !== 'none' ? ` after ${w.share_delay_ms} ms` : ''}${w.inflight_period_ms ? `, in-flight every ${w.inflight_period_ms} ms` : ''})` : '';
  const head = `${w.trace}: ${w.requests} requests, ${w.endpoints} endpoints${reps}, rate x${w.rate_scale}, seed ${w.seed} (times in ms)`;
  const rows = [COLS.map((c) => c[0]), ...res.runs.map((r) => COLS.map((c) => c[1](r)))];
  const widths = COLS.map((_, j) => Math.max(...rows.map((row) => row[j].length)));
  const lines = rows.map((row) => row.map((cell, j) => (j === 0 ? cell.padEnd(widths[j]) : cell.padStart(widths[j]))).join('  '));
  lines.splice(1, 0, widths.map((n) => '-'.repeat(n)).join('  '));
  return [head, ...lines].join('\n') + '\n';
}

/** What the table's columns mean, printed once under the last table. */
export const TABLE_LEGEND = `columns: done = requests completed, err = failed, rej = refused with 429 (every endpoint saturated);
ttft = time to first token, itl = gap between tokens, e2e = whole request (ms of engine time; "12.3s" = seconds);
itl p50/p99 pool every gap of every request; req p99 = the 99th percentile over requests of each one's mean gap
(what --slo-itl bounds; the JSON's itl_per_request_ms also has each request's own p99 gap);
percentiles are over completed requests only, so compare rej too; req/s = completions per second; tok/s =
output tokens per second; hit% = prompt tokens served from the engines' prefix caches; slo% = share of all
offered requests (rejected and failed ones count as misses) that completed within the headline SLO (TTFT ≤
--slo-headline, default 2s, and mean inter-token gap ≤ --slo-itl, default 100ms; the JSON has every --slo-ttft
bound, default 1s, 2s, 5s); good/s = those requests per second (goodput).
oracle = a yardstick, not a policy to deploy: for each request it runs a copy of every engine's true state forward
and picks the exact lowest TTFT (ignoring later arrivals); it sheds only when every engine is saturated and none
could answer within the headline SLO's TTFT. greedy_estimate = the same choice on an O(queue) estimate of that TTFT.
`;
