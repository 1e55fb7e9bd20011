/**
 * What the tuner may not trade for goodput (`--tune-constraints`): properties the project already promises
 * for the shipped weights, each checked on a candidate weight set before the search spends runs on it. A
 * weight set that fails one is not admissible: it is never picked and is listed in the report with the
 * figure that failed. Each check is deterministic (virtual time, fixed seeds) and cheap beside one
 * evaluation of the objective.
 *
 * - priority: issue #16's figure (test/sim/backlog-priority.test.ts; setup C of src/sim/README.md,
 *   "Priority classes"): no-sharing, 1000 requests, classes critical 0.2 / standard 0.5 / sheddable 0.3,
 *   the gateway's queue 200 / 10 s, 8 endpoints, seed 1; run at ×0.5 (unloaded) and ×5.5 (3× overload).
 *   Critical TTFT p99 at ×5.5 must be within 2× the unloaded one, and every critical request served.
 * - affinity: issue #17's affinity under overload (test/routing/overload-affinity.ts): two endpoints, one
 *   holding an 8k-token system prompt. With 28k tokens queued on the holder and 8k on the other, the holder
 *   keeps the request (its cache saves more than the extra queue), and without the cache credit (Tuning.
 *   cacheCredit 0) the other one gets it (affinity alone does not outweigh that load); with 60k against 8k
 *   the holder gives way; with 20k against nothing, the cold prefill goes to the idle endpoint.
 *
 * Both run with the tuned pool's other settings (--config; routing's defaults without it) where they use a
 * pool's settings at all, and with the candidate's weights in place of its scoring.
 */
import type { EngineProfile } from '../engine/index.js';
import { Router, type EndpointSignals, type PickResult, type ScoringWeights } from '../routing/index.js';
import { mergeSettings, type PoolSettings } from './config.js';
import { generateWorkload } from './generators.js';
import { parsePriorityMix, withPriorities } from './priority.js';
import { runSimulation } from './simulate.js';
import type { SimRequest } from './types.js';

export const TUNE_CONSTRAINTS = ['priority', 'affinity'] as const;
export type TuneConstraint = (typeof TUNE_CONSTRAINTS)[number];

export interface ConstraintCheck {
  constraint: TuneConstraint;
  ok: boolean;
  /** priority: critical TTFT p99 at ×5.5 / unloaded (limit 2); affinity: how many of its 4 picks went as promised */
  figure: number;
  /** what was measured, in words */
  detail: string;
}

/** What a check needs besides the weights: the tuned pool's settings and engine profile. */
export interface ConstraintSetup {
  pool: PoolSettings;
  profile: Partial<EngineProfile>;
}

export function parseConstraints(text: string): TuneConstraint[] {
  const names = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 1 && names[0] === 'none') return [];
  for (const n of names) {
    if (!(TUNE_CONSTRAINTS as readonly string[]).includes(n)) {
      throw new RangeError(`--tune-constraints takes ${TUNE_CONSTRAINTS.join(', ')} (comma-separated) or none, not "${n}"`);
    }
  }
  return [...new Set(names as TuneConstraint[])];
}

export function checkConstraint(c: TuneConstraint, weights: ScoringWeights, setup: ConstraintSetup): ConstraintCheck {
  return c === 'priority' ? checkPriority(weights, setup) : checkAffinity(weights, setup);
}

// ---- priority (issue #16) ----

export const PRIORITY_LIMIT = 2;
const MIX = parsePriorityMix('critical=0.2,standard=0.5,sheddable=0.3');
let priorityRequests: SimRequest[] | undefined;

function checkPriority(weights: ScoringWeights, setup: ConstraintSetup): ConstraintCheck {
  priorityRequests ??= withPriorities(generateWorkload('no-sharing', { seed: 1, requests: 1000 }), MIX, 1);
  const pool = mergeSettings(setup.pool, { scoring: { ...weights } });
  const run = (rateScale: number) =>
    runSimulation({
      requests: priorityRequests!,
      policies: ['scored'],
      endpoints: 8,
      seed: 1,
      profile: setup.profile,
      pool,
      rateScale,
      queue: { maxLength: 200, maxWaitMs: 10_000 },
      priorityMix: MIX,
    }).runs[0].per_priority!.critical;
  const u = run(0.5);
  const o = run(5.5);
  const ratio = u.ttft_ms.p99 > 0 ? o.ttft_ms.p99 / u.ttft_ms.p99 : Infinity;
  const served = o.completed === o.requests;
  const ok = ratio <= PRIORITY_LIMIT && served;
  const detail =
    `critical TTFT p99 at ×5.5 ${Math.round(o.ttft_ms.p99)} ms = ${ratio.toFixed(2)}× unloaded ${Math.round(u.ttft_ms.p99)} ms (limit ${PRIORITY_LIMIT}×)` +
    (served ? '' : `; ${o.requests - o.completed} of ${o.requests} critical requests not served`);
  return { constraint: 'priority', ok, figure: Math.round(ratio * 1000) / 1000, detail };
}

// ---- affinity under overload (issue #17) ----

const SIGNALS: EndpointSignals = { waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0 };
const SYSTEM = 'You are a careful analyst of shipping manifests. '.repeat(640); // ≈ 31k chars, 8k tokens
const withPrefix = (q: string) => ({ model: 'm', promptText: SYSTEM + q, promptTokens: Math.ceil((SYSTEM.length + q.length) / 4) });
const plain = (tag: string, tokens: number) => ({ model: 'm', promptText: `${tag}: `.repeat(40), promptTokens: tokens });
const elsewhere = (ep: string) => new Set([ep === 'a:1' ? 'b:1' : 'a:1']);

function endpointOf(r: PickResult): string {
  if (r.kind !== 'ok') throw new Error(`affinity check: a pick answered ${r.kind}`);
  return r.endpoint;
}

/** Where a request with the system prompt goes when `a` holds it and aheadA / aheadB tokens are queued. */
function pickWith(weights: ScoringWeights, setup: ConstraintSetup, aheadA: number, aheadB: number, cacheCredit?: number): string {
  const r = Router.fromPool('p', { prefix: setup.pool.prefix, scoring: { ...weights }, saturation: { queue_depth: 0, kv_cache: 0 } }, ['a:1', 'b:1'], {
    random: () => 0.5,
    tuning: cacheCredit === undefined ? {} : { cacheCredit },
  });
  for (const e of ['a:1', 'b:1']) r.updateSignals(e, SIGNALS, 0);
  const first = r.pick('p', { ...withPrefix('warm'), exclude: elsewhere('a:1') }, 0);
  if (first.kind !== 'ok') throw new Error(`affinity check: a pick answered ${first.kind}`);
  r.onFirstByte(first.ticket, 500);
  r.onEnd(first.ticket, 600, 'ok');
  if (aheadA > 0) endpointOf(r.pick('p', { ...plain('queued on a', aheadA), exclude: elsewhere('a:1') }, 1000));
  if (aheadB > 0) endpointOf(r.pick('p', { ...plain('queued on b', aheadB), exclude: elsewhere('b:1') }, 1000));
  return endpointOf(r.pick('p', withPrefix('question'), 1000, { dryRun: true }));
}

function checkAffinity(weights: ScoringWeights, setup: ConstraintSetup): ConstraintCheck {
  const cases: Array<{ aheadA: number; aheadB: number; credit?: number; want: string; what: string }> = [
    { aheadA: 28_000, aheadB: 8_000, want: 'a:1', what: '28k tokens queued on the holder, 8k on the other: the holder keeps it' },
    { aheadA: 28_000, aheadB: 8_000, credit: 0, want: 'b:1', what: 'the same without the cache credit: load wins (affinity alone does not outweigh 1.75× the cost)' },
    { aheadA: 60_000, aheadB: 8_000, want: 'b:1', what: '60k against 8k: the holder gives way' },
    { aheadA: 20_000, aheadB: 0, want: 'b:1', what: '20k against an idle endpoint: the cold prefill goes to the idle one' },
  ];
  const failed = cases.filter((c) => pickWith(weights, setup, c.aheadA, c.aheadB, c.credit) !== c.want);
  const passed = cases.length - failed.length;
  const detail = failed.length === 0 ? `all ${cases.length} picks as promised` : `not as promised: ${failed.map((c) => c.what).join('; ')}`;
  return { constraint: 'affinity', ok: failed.length === 0, figure: passed, detail };
}
