export { Engine } from './engine.js';
export type { EngineRequest, EngineEvent, EngineSnapshot } from './engine.js';
export { DEFAULT_PROFILE, stepCostMs } from './profile.js';
export type { EngineProfile } from './profile.js';
export { tokenize, CHARS_PER_TOKEN, VOCAB_SIZE } from './tokenizer.js';
export { blockHashes, computeBlockHashes, loraSalt } from './hash.js';
export { ENGINE_FLAG_OPTIONS, ENGINE_FLAGS_HELP, engineProfileFromFlags, numberFlag } from './flags.js';
