import type { EngineProfile } from '../engine/index.js';

export type FailMode = 'refuse' | '500' | 'cut' | 'mixed';
export type MetricsFault = 'ok' | 'hang' | 'error';

export interface MockOptions {
  /** served (base) model name */
  model: string;
  /** LoRA adapter names, served as extra models whose parent is `model` */
  lora?: string[];
  /** alias of `lora` */
  loras?: string[];
  maxLoras?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  /** number of KV blocks (num_gpu_blocks) */
  kvBlocks?: number;
  blockSize?: number;
  prefillTokensPerS?: number;
  decodeMs?: number;
  decodeMsPerSeq?: number;
  stepOverheadMs?: number;
  loraLoadMs?: number;
  maxModelLen?: number;
  /** any further engine profile overrides */
  profile?: Partial<EngineProfile>;
  /** > 1 runs faster than real time (default 1) */
  timeScale?: number;
  /** output text seed (default 0) */
  seed?: number;
  /** probability of an injected failure per completion request (default 0) */
  failRate?: number;
  failMode?: FailMode;
  /** after this many seconds (real time), GET /metrics hangs (never answers) */
  metricsHangAfterS?: number;
  /** request body limit in bytes (default 64 MiB) */
  maxBodyBytes?: number;
  /**
   * Responses API answers kept per server for `previous_response_id` (LRU; default 1024; 0: none kept, as
   * vLLM without VLLM_ENABLE_RESPONSES_API_STORE)
   */
  responseStore?: number;
  /** serve HTTPS with this PEM certificate and key (a model server behind its own TLS) */
  tls?: { cert: string; key: string };
}

export function profileFromOptions(o: MockOptions): Partial<EngineProfile> {
  const p: Partial<EngineProfile> = { ...(o.profile ?? {}) };
  const loras = o.lora ?? o.loras;
  if (loras !== undefined) p.loras = loras;
  if (o.maxLoras !== undefined) p.maxLoras = o.maxLoras;
  if (o.maxNumSeqs !== undefined) p.maxNumSeqs = o.maxNumSeqs;
  if (o.maxNumBatchedTokens !== undefined) p.maxNumBatchedTokens = o.maxNumBatchedTokens;
  if (o.kvBlocks !== undefined) p.numGpuBlocks = o.kvBlocks;
  if (o.blockSize !== undefined) p.blockSize = o.blockSize;
  if (o.prefillTokensPerS !== undefined) p.prefillTokensPerS = o.prefillTokensPerS;
  if (o.decodeMs !== undefined) p.decodeMs = o.decodeMs;
  if (o.decodeMsPerSeq !== undefined) p.decodeMsPerSeq = o.decodeMsPerSeq;
  if (o.stepOverheadMs !== undefined) p.stepOverheadMs = o.stepOverheadMs;
  if (o.loraLoadMs !== undefined) p.loraLoadMs = o.loraLoadMs;
  if (o.maxModelLen !== undefined) p.maxModelLen = o.maxModelLen;
  if ((p.loras?.length ?? 0) > 0 && p.maxLoras === undefined) p.maxLoras = 1;
  return p;
}
