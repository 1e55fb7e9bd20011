/** Engine flags `bench policies` passes to both the mocks (as CLI flags) and the simulator (as profile keys). */
import type { EngineProfile } from '../src/engine/index.js';

export const ENGINE_FLAGS: Array<[flag: string, key: keyof EngineProfile]> = [
  ['max-num-seqs', 'maxNumSeqs'],
  ['max-num-batched-tokens', 'maxNumBatchedTokens'],
  ['kv-blocks', 'numGpuBlocks'],
  ['block-size', 'blockSize'],
  ['prefill-tokens-per-s', 'prefillTokensPerS'],
  ['decode-ms', 'decodeMs'],
  ['max-loras', 'maxLoras'],
];
