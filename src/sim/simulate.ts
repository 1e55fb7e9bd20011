/** runSimulation: one workload, several policies, the result JSON of shared/spec/README.md. */
import type { EngineProfile } from '../engine/index.js';
import { DEFAULT_PROFILE } from '../engine/index.js';
import type { PolicyName } from '../routing/index.js';
import { simConfig, type PoolSettings } from './config.js';
import { runLoop, type LoopOptions } from './loop.js';
import { greedyEstimatePolicy, oraclePolicy } from './policies.js';
import { endpointName, routerPolicy, type ReplicaOptions } from './router-policy.js';
import type { RequestRecord } from './run-stats.js';
import { DEFAULT_SLOS, headlineOf, type SloSpec } from './slo.js';
import type { RunResult, SimRequest, SimResult } from './types.js';

/** The router's policies (in the order runs are reported) and the two yardsticks with full knowledge. */
export const SIM_POLICIES = ['round_robin', 'least_request', 'random', 'scored', 'greedy_estimate', 'oracle'] as const satisfies readonly (PolicyName | 'greedy_estimate' | 'oracle')[];
/** Policies that read the engines' true state: shown for comparison, never a candidate to deploy. */
export const SIM_YARDSTICKS: readonly string[] = ['greedy_estimate', 'oracle'];
export type SimPolicyName = (typeof SIM_POLICIES)[number];

export interface SimulationOptions {
  /** the workload (trace or generator output), sorted by arrival */
  requests: readonly SimRequest[];
  /** a label for the JSON (trace path or generator name) */
  trace?: string;
  /** simulated endpoints (default 8) */
  endpoints?: number;
  /** engine profile overrides (default: the engine's DEFAULT_PROFILE) */
  profile?: Partial<EngineProfile>;
  /** default: all of SIM_POLICIES */
  policies?: readonly string[];
  /** the pool's scoring/prefix/saturation/metrics/max_num_seqs (default: the config schema's defaults) */
  pool?: PoolSettings;
  /** seeds the router's random policy (default 1) */
  seed?: number;
  /** called after each policy's run (progress for a terminal): its name, how many are done, of how many */
  onPolicyDone?: (policy: string, done: number, of: number) => void;
  /** arrivals X times denser (default 1) */
  rateScale?: number;
  /** latency objectives for the runs' `slo` figures (default DEFAULT_SLOS) */
  slos?: readonly SloSpec[];
  /** gateway replicas, each with its own router, and whether they share what they learn (default: one) */
  replicas?: ReplicaOptions;
  /** called once per request as it ends, with its policy (e.g. for a report's CDF) */
  onRecord?: (policy: string, rec: RequestRecord) => void;
  /** the gateway's flow-control queue (default none: a saturated pick is a 429) */
  queue?: LoopOptions['queue'];
  /** recorded in the result's workload (the requests carry their classes already) */
  priorityMix?: Record<string, number>;
}

/** The requests with arrivals compressed by rateScale (a copy; the input is not changed). */
export function scaleArrivals(reqs: readonly SimRequest[], rateScale: number): SimRequest[] {
  if (!(rateScale > 0)) throw new RangeError('rate scale must be > 0');
  return reqs.map((r) => ({ ...r, arrivalMs: r.arrivalMs / rateScale }));
}

/** The engine profile a workload needs: its adapters registered (and at least one LoRA slot). */
export function profileFor(reqs: readonly SimRequest[], profile: Partial<EngineProfile> = {}): Partial<EngineProfile> {
  const loras = new Set<string>(profile.loras ?? []);
  for (const r of reqs) if (r.lora !== undefined) loras.add(r.lora);
  const out: Partial<EngineProfile> = { ...profile };
  if (loras.size > 0) {
    out.loras = [...loras].sort();
    if ((out.maxLoras ?? DEFAULT_PROFILE.maxLoras) < 1) out.maxLoras = 1;
  }
  return out;
}

export function checkPolicies(policies: readonly string[]): SimPolicyName[] {
  for (const p of policies) {
    if (!(SIM_POLICIES as readonly string[]).includes(p)) {
      throw new Error(`unknown policy "${p}" (one of: ${SIM_POLICIES.join(', ')})`);
    }
  }
  return policies as SimPolicyName[];
}

/** One policy over the workload. */
export function runPolicy(
  policy: SimPolicyName,
  requests: readonly SimRequest[],
  opts: { endpoints: number; profile: Partial<EngineProfile>; pool: PoolSettings; seed: number; record?: LoopOptions['record']; slos?: readonly SloSpec[]; replicas?: ReplicaOptions; queue?: LoopOptions['queue'] },
): RunResult {
  const names = Array.from({ length: opts.endpoints }, (_, i) => endpointName(i));
  const models = [...new Set(requests.map((r) => r.model).filter((m): m is string => m !== undefined))].sort();
  const setup = simConfig(names, models, opts.pool);
  const sat = setup.pool.saturation;
  const admission = { queueDepth: sat.queue_depth, kvCache: sat.kv_cache };
  const deadlineMs = (headlineOf(opts.slos) ?? headlineOf(DEFAULT_SLOS)!).ttftMs;
  const make =
    policy === 'oracle'
      ? (engines: Parameters<typeof oraclePolicy>[0]) => oraclePolicy(engines, admission, deadlineMs)
      : policy === 'greedy_estimate'
        ? (engines: Parameters<typeof greedyEstimatePolicy>[0]) => greedyEstimatePolicy(engines, admission)
        : routerPolicy(setup, policy, opts.seed, opts.profile, opts.replicas);
  return runLoop(requests, make, { endpoints: opts.endpoints, profile: opts.profile, scrapeIntervalMs: setup.scrapeIntervalMs, record: opts.record, slos: opts.slos, queue: opts.queue });
}

export function runSimulation(opts: SimulationOptions): SimResult {
  const endpoints = opts.endpoints ?? 8;
  const seed = opts.seed ?? 1;
  const rateScale = opts.rateScale ?? 1;
  const policies = checkPolicies(opts.policies ?? SIM_POLICIES);
  const requests = rateScale === 1 ? opts.requests : scaleArrivals(opts.requests, rateScale);
  const profile = profileFor(requests, opts.profile);
  const pool = opts.pool ?? {};
  const runs = policies.map((p, i) => {
    const onRecord = opts.onRecord;
    const record = onRecord ? (rec: RequestRecord) => onRecord(p, rec) : undefined;
    const run = runPolicy(p, requests, { endpoints, profile, pool, seed, slos: opts.slos, record, replicas: opts.replicas, queue: opts.queue });
    opts.onPolicyDone?.(p, i + 1, policies.length);
    return run;
  });
  const full: EngineProfile = { ...DEFAULT_PROFILE, ...profile } as EngineProfile;
  return {
    workload: {
      trace: opts.trace ?? 'custom',
      requests: requests.length,
      endpoints,
      seed,
      rate_scale: rateScale,
      ...(opts.replicas && opts.replicas.replicas > 1
        ? {
            replicas: opts.replicas.replicas,
            share: opts.replicas.share,
            share_delay_ms: opts.replicas.shareDelayMs,
            ...(opts.replicas.share === 'events+inflight' ? { inflight_period_ms: opts.replicas.inflightPeriodMs ?? 0 } : {}),
            spread: opts.replicas.spread,
          }
        : {}),
      ...(opts.priorityMix ? { priority_mix: opts.priorityMix as Record<'critical' | 'standard' | 'sheddable', number> } : {}),
      ...(opts.queue && opts.queue.maxLength > 0 ? { queue: { max_length: opts.queue.maxLength, max_wait_ms: opts.queue.maxWaitMs } } : {}),
      engine: {
        max_num_seqs: full.maxNumSeqs,
        max_num_batched_tokens: full.maxNumBatchedTokens,
        kv_blocks: full.numGpuBlocks,
        block_size: full.blockSize,
        prefill_tokens_per_s: full.prefillTokensPerS,
        decode_ms: full.decodeMs,
        max_loras: full.maxLoras,
        loras: full.loras,
      },
    },
    runs,
  };
}
