/**
 * `infergate simulate` and its programmatic API: replay traffic in virtual time against simulated vLLM
 * servers (src/engine) with the gateway's own picker (src/routing), per policy, against an oracle.
 */
export { simulateMain, SIMULATE_HELP } from './cli.js';
export { runSimulation, runPolicy, scaleArrivals, profileFor, SIM_POLICIES, SIM_YARDSTICKS } from './simulate.js';
export type { SimulationOptions, SimPolicyName } from './simulate.js';
export { runLoop, requestTokens } from './loop.js';
export type { SimPolicy, PickContext, PickOutcome, LoopOptions } from './loop.js';
export type { RequestRecord } from './run-stats.js';
export { oraclePolicy, greedyEstimatePolicy } from './policies.js';
export { generateWorkload, GENERATORS, DEFAULT_RATES } from './generators.js';
export type { GeneratorName, GenerateOptions } from './generators.js';
export {
  loadTrace,
  parseTrace,
  toTraceJsonl,
  traceRequestText,
  traceTokens,
  tracePrefixBlocks,
  TRACE_BLOCK_TOKENS,
  TRACE_BLOCK_CHARS,
} from './trace.js';
export { checkOverloadTargets, checkTargets, formatOverloadTargets, formatTargets, OVERLOAD_MAX_ORACLE_SHED } from './targets.js';
export type { TargetReport, TargetCheck } from './targets.js';
export { tune, formatTuneReport, OUT_OF_SAMPLE_RULE } from './tune.js';
export { minimaxPick, regrets, admissible } from './tune-objective.js';
export type { TuneOptions, TuneReport, TuneInput, InputFigures, HoldoutFigures } from './tune.js';
export { formatTable } from './table.js';
export { simConfig, poolSettingsFromFile, SIM_MODEL, SIM_POOL } from './config.js';
export type { PoolSettings } from './config.js';
export type { SimRequest, SimResult, RunResult, Summary } from './types.js';
