/**
 * What the routing core is configured with: one pool's options (what the picker reads) and the router's
 * input (pools and model routes). Plain data with routing's own defaults; the gateway maps its validated
 * config file onto these in src/config/routing.ts, and a unit test keeps the file's defaults equal to these.
 * Keys are the config file's, so a pool section of the file reads the same here.
 */
import { parseDuration } from '../common/units.js';
import { POLICY_NAMES, type PolicyName } from './policies/index.js';
import { DEFAULT_WEIGHTS, SCORER_NAMES, type ScoringWeights } from './scorers/index.js';

export interface PrefixOptions {
  /** characters per hashed block */
  block_chars: number;
  /** blocks hashed at most per prompt (how deep the router looks) */
  max_blocks: number;
  /** index capacity per endpoint, in blocks (at the default, the endpoint's reported KV size may set it) */
  capacity_blocks_per_endpoint: number;
}

export interface SaturationOptions {
  /** waiting requests at which an endpoint counts as saturated; 0: off */
  queue_depth: number;
  /** KV-cache use (0..1) at which an endpoint counts as saturated; 0: off */
  kv_cache: number;
  /** the Retry-After when every endpoint is saturated: 'auto' (from drain rates) or ms */
  retry_after: 'auto' | number;
  /**
   * estimated prefill work queued ahead of a new request (ms, at the endpoint's observed prefill speed) at
   * which an endpoint counts as saturated; 0: off
   */
  max_prefill_backlog: number;
}

export interface PoolOptions {
  /** the engine kind; a pool whose engine changes on reconfigure starts afresh */
  engine: string;
  endpoints: string[];
  /** endpoints come from discovery: a reconfigure without a static list keeps the discovered ones */
  discovery: boolean;
  policy: PolicyName;
  /** the endpoints' batch size, when known and not reported in their signals */
  max_num_seqs?: number;
  scoring: ScoringWeights;
  prefix: PrefixOptions;
  saturation: SaturationOptions;
  /** signals older than stale_after (ms) are not used */
  metrics: { stale_after: number };
  /**
   * the most of the pool's endpoints (in %) ejected after errors at once; at least one may always be,
   * 0 turns ejection off
   */
  max_ejection_percent: number;
}

/** A model name clients send: served by one pool, or an alias over other models by weight. */
export interface ModelRoute {
  name: string;
  pool?: string;
  targets?: Array<{ model: string; weight: number }>;
}

/** The router's input. */
export interface RouterConfig {
  pools: Record<string, PoolOptions>;
  models: ModelRoute[];
}

const defaults: PoolOptions = {
  engine: 'vllm',
  endpoints: [],
  discovery: false,
  policy: 'scored',
  scoring: { ...DEFAULT_WEIGHTS },
  prefix: { block_chars: 64, max_blocks: 2048, capacity_blocks_per_endpoint: 31250 },
  saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto', max_prefill_backlog: 1500 },
  metrics: { stale_after: 1000 },
  max_ejection_percent: 50,
};
for (const v of Object.values(defaults)) if (typeof v === 'object') Object.freeze(v);

/** Routing's defaults: what poolOptions() fills in. The config file's defaults must equal these (tested). */
export const DEFAULT_POOL_OPTIONS: Readonly<PoolOptions> = Object.freeze(defaults);

/** A duration in ms, or as users write it ("250ms", "2s"). */
export type Duration = number | string;

/** Partial pool options, durations also as strings: what tests, the simulator and benchmarks write. */
export interface PoolOptionsInput {
  engine?: string;
  endpoints?: string[];
  discovery?: boolean;
  policy?: PolicyName;
  max_num_seqs?: number;
  scoring?: Partial<ScoringWeights>;
  prefix?: Partial<PrefixOptions>;
  saturation?: Partial<{ queue_depth: number; kv_cache: number; retry_after: 'auto' | Duration; max_prefill_backlog: Duration }>;
  metrics?: Partial<{ stale_after: Duration }>;
  max_ejection_percent?: number;
}

/** Full pool options: the given keys over the defaults. Throws on an unknown policy, scorer or duration. */
export function poolOptions(input: PoolOptionsInput = {}): PoolOptions {
  const d = DEFAULT_POOL_OPTIONS;
  const policy = input.policy ?? d.policy;
  if (!(POLICY_NAMES as readonly string[]).includes(policy)) {
    throw new RangeError(`unknown policy "${policy}" (one of: ${POLICY_NAMES.join(', ')})`);
  }
  for (const k of Object.keys(input.scoring ?? {})) {
    if (!(SCORER_NAMES as readonly string[]).includes(k)) throw new RangeError(`unknown scorer "${k}" (one of: ${SCORER_NAMES.join(', ')})`);
  }
  const retry = input.saturation?.retry_after ?? d.saturation.retry_after;
  const out: PoolOptions = {
    engine: input.engine ?? d.engine,
    endpoints: [...(input.endpoints ?? d.endpoints)],
    discovery: input.discovery ?? d.discovery,
    policy,
    scoring: { ...d.scoring, ...input.scoring },
    prefix: { ...d.prefix, ...input.prefix },
    saturation: {
      queue_depth: input.saturation?.queue_depth ?? d.saturation.queue_depth,
      kv_cache: input.saturation?.kv_cache ?? d.saturation.kv_cache,
      retry_after: retry === 'auto' ? 'auto' : ms(retry, 'saturation.retry_after'),
      max_prefill_backlog: ms(input.saturation?.max_prefill_backlog ?? d.saturation.max_prefill_backlog, 'saturation.max_prefill_backlog'),
    },
    metrics: { stale_after: ms(input.metrics?.stale_after ?? d.metrics.stale_after, 'metrics.stale_after') },
    max_ejection_percent: input.max_ejection_percent ?? d.max_ejection_percent,
  };
  if (input.max_num_seqs !== undefined) out.max_num_seqs = input.max_num_seqs;
  return out;
}

function ms(v: Duration, key: string): number {
  const n = parseDuration(v);
  if (n === null) throw new RangeError(`${key}: not a duration: ${JSON.stringify(v)}`);
  return n;
}
