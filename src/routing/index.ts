/** The routing core's front door: everything outside src/routing imports from here. */
export { Router, type RouterOptions } from './router.js';
export { PoolRouter, type PoolRouterOptions, type DebugEndpoint } from './pool.js';
export { DEFAULT_TUNING, type Tuning } from './tuning.js';
export {
  DEFAULT_POOL_OPTIONS,
  poolOptions,
  type PoolOptions,
  type PoolOptionsInput,
  type PrefixOptions,
  type SaturationOptions,
  type ModelRoute,
  type RouterConfig,
  type Duration,
} from './options.js';
export { SCORERS, SCORER_NAMES, DEFAULT_WEIGHTS, type Scorer, type ScorerName, type ScoringWeights } from './scorers/index.js';
export { POLICIES, POLICY_NAMES, type Policy, type PolicyName } from './policies/index.js';
export { PrefixIndex, type PrefixIndexOptions } from './prefix-index.js';
export { hashPrefixBlocks, hashPrefixBlocksInto, hashString } from './hash.js';
export type {
  EndpointSignals,
  PickInput,
  PickOptions,
  Ticket,
  PickResult,
  PickExplain,
  CandidateExplain,
  Outcome,
} from './types.js';
export { WaitQueue, PRIORITY_CLASSES, classRank, type PriorityClass, type Waiter, type PushResult } from './wait-queue.js';
