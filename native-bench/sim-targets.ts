/**
 * `sim-targets`: issue #17's overload targets over the workloads and rate scales of src/sim/README.md
 * ("Routing under overload"), for one or more seeds: per cell, `simulate` with scored, least_request and the
 * oracle (virtual time, deterministic per seed), then `checkOverloadTargets`. Prints a markdown table and
 * writes DIR/sim-targets.json. Seeds change the generators' draws (the trace is the same for every seed; only
 * the router's random draws change there), so several seeds show which verdicts hold and which are one
 * draw's luck.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOverloadTargets, generateWorkload, loadTrace, runSimulation, type SimRequest } from '../src/sim/index.js';
import { poolSettingsFromFile, type PoolSettings } from '../src/sim/config.js';
import { headlineOf } from '../src/sim/slo.js';
import { writeResult } from './common.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEFAULT_TRACE = path.resolve(ROOT, '..', 'shared', 'traces', 'mooncake_synthetic_trace.jsonl');

/** The cells of src/sim/README.md's overload table: workload, rate scales. */
const CELLS: ReadonlyArray<readonly [string, readonly number[]]> = [
  ['trace', [1, 2, 2.25, 2.5, 3]],
  ['shared-prefix', [1, 2, 2.5, 3]],
  ['rag', [1, 2, 2.5, 3]],
  ['multi-turn', [2, 4, 6, 8]],
  ['no-sharing', [1, 2, 3, 4, 6, 8]],
  ['lora-mix', [1, 2, 4]],
  ['burst', [1, 2]],
  ['spikes', [1, 4]],
];

interface Cell {
  workload: string;
  scale: number;
  seed: number;
  applies: boolean;
  oracle: Figures;
  scored: Figures;
  least_request: Figures;
  checks: Array<{ name: string; value: number; limit: number; pass: boolean }>;
}
interface Figures {
  shed_share: number;
  goodput_rps: number;
  hit_rate: number;
}

const pct = (x: number) => (x * 100).toFixed(1);

export async function runSimTargets(opts: Map<string, string>): Promise<void> {
  const seeds = (opts.get('seeds') ?? '1').split(',').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n)) throw new Error(`--seeds: ${JSON.stringify(s)} is not an integer`);
    return n;
  });
  const only = opts.get('only') ? new Set(opts.get('only')!.split(',')) : null;
  const trace = opts.get('trace') ?? DEFAULT_TRACE;
  const pool: PoolSettings = opts.has('config') ? poolSettingsFromFile(opts.get('config')!) : {};
  const out = opts.get('out') ?? 'bench-out';
  const cells: Cell[] = [];
  const t0 = Date.now();
  for (const [workload, scales] of CELLS) {
    if (only && !only.has(workload)) continue;
    if (workload === 'trace' && !existsSync(trace)) {
      console.error(`sim-targets: ${trace} not found: the trace rows are skipped (--trace FILE)`);
      continue;
    }
    for (const seed of seeds) {
      // the trace is one recorded workload: a second seed would only repeat it
      if (workload === 'trace' && seed !== seeds[0]) continue;
      const requests: SimRequest[] = workload === 'trace' ? loadTrace(trace) : generateWorkload(workload, { seed });
      for (const scale of scales) {
        const res = runSimulation({ requests, trace: workload, rateScale: scale, seed, pool, policies: ['scored', 'least_request', 'oracle'], queue: pool.queue });
        const rep = checkOverloadTargets(res, workload === 'no-sharing');
        const fig = (p: string): Figures => {
          const r = res.runs.find((x) => x.policy === p)!;
          return { shed_share: r.shed_share, goodput_rps: headlineOf(r.slo)?.goodput_rps ?? 0, hit_rate: r.prefix_cache_hit_rate };
        };
        cells.push({ workload, scale, seed, applies: rep.applies, oracle: fig('oracle'), scored: fig('scored'), least_request: fig('least_request'), checks: rep.checks });
        const miss = rep.checks.filter((c) => !c.pass).length;
        console.error(`sim-targets: ${workload} x${scale} seed ${seed}: ${miss === 0 ? 'ok' : `${miss} miss(es)`} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
      }
    }
  }
  const misses = cells.flatMap((c) => c.checks.filter((k) => !k.pass).map((k) => ({ workload: c.workload, scale: c.scale, seed: c.seed, ...k })));
  console.log('| workload ×rate | seed | oracle shed % / good/s / hit % | scored shed % (limit) | scored good/s (× oracle) | scored hit % | least_request good/s | verdict |');
  console.log('| --- | ---: | --- | --- | --- | ---: | ---: | --- |');
  for (const c of cells) {
    const bad = c.checks.filter((k) => !k.pass).map((k) => k.name.replace(/^scored /, '').replace(/ [≥≤].*/, ''));
    const verdict = c.checks.length === 0 ? 'n/a' : bad.length === 0 ? 'all met' : `MISS ${bad.join(', ')}`;
    const lim = 1.1 * c.oracle.shed_share + 0.005;
    const ratio = c.oracle.goodput_rps > 0 ? (c.scored.goodput_rps / c.oracle.goodput_rps).toFixed(2) : '—';
    console.log(
      `| ${c.workload} ×${c.scale} | ${c.seed} | ${pct(c.oracle.shed_share)} / ${c.oracle.goodput_rps.toFixed(2)} / ${pct(c.oracle.hit_rate)} | ${pct(c.scored.shed_share)} (${c.applies ? pct(lim) : 'n/a'}) | ${c.scored.goodput_rps.toFixed(2)} (${ratio}) | ${pct(c.scored.hit_rate)} | ${c.least_request.goodput_rps.toFixed(2)} | ${verdict} |`,
    );
  }
  const missed = cells.filter((c) => c.checks.some((k) => !k.pass)).length;
  console.log(`\n${misses.length} failed check(s) in ${missed} of ${cells.length} cells; ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const file = writeResult(out, 'sim-targets.json', 'sim-targets', { seeds, trace: existsSync(trace) ? trace : null, only: only ? [...only] : null, config: opts.get('config') ?? null }, { cells, misses });
  console.error(`wrote ${file}`);
}
