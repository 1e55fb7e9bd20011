export { Router, poolConfig, type RouterOptions } from './router.js';
export { PoolRouter, DEFAULT_TUNING, type Tuning, type PoolRouterOptions, type DebugEndpoint } from './pool.js';
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
