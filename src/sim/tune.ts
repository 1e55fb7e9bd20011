/**
 * --tune: a deterministic coordinate search over the scorer weights, the saturation thresholds and
 * prefix.max_blocks (how deep the router looks) for the
 * lowest `scored` TTFT p99 on the given traffic. A candidate that rejects more requests than the defaults
 * do is penalised (shedding load is not a way to a better p99). Each evaluation is one full run.
 */
import type { EngineProfile } from '../engine/index.js';
import { SCORER_NAMES, type ScoringWeights } from '../routing/index.js';
import { mergeSettings, simConfig, type PoolSettings } from './config.js';
import { runPolicy } from './simulate.js';
import { endpointName } from './router-policy.js';
import type { RunResult, SimRequest } from './types.js';


export interface TuneOptions {
  requests: readonly SimRequest[];
  endpoints: number;
  profile: Partial<EngineProfile>;
  pool: PoolSettings;
  seed: number;
  /** at most this many runs (default 40) */
  budget?: number;
  /** progress lines (e.g. to stderr) */
  log?: (line: string) => void;
}

export interface TuneResult {
  defaults: { settings: PoolSettings; run: RunResult };
  best: { settings: PoolSettings; run: RunResult };
  /** (default p99 − best p99) / default p99 */
  gain: number;
  evaluations: number;
  yaml: string;
}

interface Point {
  scoring: ScoringWeights;
  queueDepth: number;
  kvCache: number;
  /** prefix.max_blocks: how deep into a prompt the router looks for shared prefixes */
  maxBlocks: number;
}

export function tune(opts: TuneOptions): TuneResult {
  const budget = opts.budget ?? 40;
  const log = opts.log ?? (() => {});
  const base = simConfig([endpointName(0)], [], opts.pool).pool;
  const start: Point = {
    scoring: { ...base.scoring },
    queueDepth: base.saturation.queue_depth,
    kvCache: base.saturation.kv_cache,
    maxBlocks: base.prefix.max_blocks,
  };
  const settingsOf = (p: Point): PoolSettings =>
    mergeSettings(opts.pool, {
      scoring: { ...p.scoring },
      saturation: { queue_depth: p.queueDepth, kv_cache: p.kvCache },
      prefix: { max_blocks: p.maxBlocks },
    });
  const n = opts.requests.length;
  let evaluations = 0;
  const seen = new Map<string, { run: RunResult; obj: number }>();
  let baseRejected = 0;
  const evaluate = (p: Point): { run: RunResult; obj: number } => {
    const key = JSON.stringify(p);
    const hit = seen.get(key);
    if (hit) return hit;
    evaluations++;
    const run = runPolicy('scored', opts.requests, {
      endpoints: opts.endpoints,
      profile: opts.profile,
      pool: settingsOf(p),
      seed: opts.seed,
    });
    const extra = Math.max(0, run.rejected + run.errors - baseRejected) / Math.max(1, n);
    const obj = run.ttft_ms.p99 * (1 + 50 * extra);
    const r = { run, obj };
    seen.set(key, r);
    return r;
  };

  const d = evaluate(start);
  baseRejected = d.run.rejected + d.run.errors;
  d.obj = d.run.ttft_ms.p99; // the penalty is relative to the defaults' own rejections
  log(`tune: defaults ttft p99 ${d.run.ttft_ms.p99} ms`);
  let best = start;
  let bestEv = d;

  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  const moves = (p: Point, f: number): Point[] => {
    const out: Point[] = [];
    for (const k of SCORER_NAMES) {
      const v = p.scoring[k];
      const cands = v > 0 ? [v * f, v / f] : [1];
      if (v > 0 && f >= 2) cands.push(0);
      for (const c of cands) out.push({ ...p, scoring: { ...p.scoring, [k]: round3(c) } });
    }
    for (const c of [p.queueDepth * f, p.queueDepth / f]) out.push({ ...p, queueDepth: round3(Math.max(0.5, c)) });
    for (const c of [p.kvCache + 0.05 * f, p.kvCache - 0.05 * f]) out.push({ ...p, kvCache: round3(Math.min(1, Math.max(0.3, c))) });
    for (const c of [p.maxBlocks * f * f, p.maxBlocks / f]) out.push({ ...p, maxBlocks: Math.min(65536, Math.max(16, Math.round(c))) });
    return out;
  };

  let f = 2;
  while (evaluations < budget && f > 1.05) {
    let improved = false;
    for (const cand of moves(best, f)) {
      if (evaluations >= budget) break;
      const ev = evaluate(cand);
      if (ev.obj < bestEv.obj * 0.995) {
        best = cand;
        bestEv = ev;
        improved = true;
        log(`tune: ${evaluations} runs, ttft p99 ${ev.run.ttft_ms.p99} ms with ${JSON.stringify(cand)}`);
      }
    }
    if (!improved) f = Math.sqrt(f);
  }

  const gain = d.run.ttft_ms.p99 > 0 ? (d.run.ttft_ms.p99 - bestEv.run.ttft_ms.p99) / d.run.ttft_ms.p99 : 0;
  const yaml = [
    'scoring:',
    ...SCORER_NAMES.map((k) => `  ${k}: ${best.scoring[k]}`),
    'saturation:',
    `  queue_depth: ${best.queueDepth}`,
    `  kv_cache: ${best.kvCache}`,
    'prefix:',
    `  max_blocks: ${best.maxBlocks}`,
  ].join('\n') + '\n';
  return {
    defaults: { settings: settingsOf(start), run: d.run },
    best: { settings: settingsOf(best), run: { ...bestEv.run, policy: 'scored (tuned)' } },
    gain: Math.round(gain * 10000) / 10000,
    evaluations,
    yaml,
  };
}
