/**
 * Engine profile: capacity and cost-model figures. Defaults approximate Llama-3.1-8B-Instruct (BF16) in
 * vLLM v1 on one H100 80GB with gpu_memory_utilization 0.9:
 * - KV: 2 (K,V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB per token; about 50 GiB left for
 *   KV after 16 GB of weights and activations -> about 400k tokens = 25,000 blocks of 16 tokens.
 * - Prefill: 8B params -> about 16 GFLOP per token; at roughly 30-40% of the H100's dense BF16 peak,
 *   with attention over long prompts, about 16k tokens/s.
 * - Decode: a batch-1 step reads the 16 GB of weights (about 5 ms at 3.35 TB/s) plus launch and
 *   sampling overhead: about 12 ms; each running sequence adds about 0.07 ms (batch 256 -> about 30 ms),
 *   and attention reads each decoding sequence's KV: about 0.04 ms per 1,000 context tokens.
 * - Scheduler: vLLM's defaults max_num_seqs 256, max_num_batched_tokens 8192 (chunked prefill),
 *   max_loras 1, max_model_len 131072 (Llama 3.1's context).
 * - LoRA load: a rank-16 adapter copied into a GPU slot, about 30 ms.
 */
export interface EngineProfile {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  numGpuBlocks: number;
  blockSize: number;
  /** prefill throughput, tokens/s */
  prefillTokensPerS: number;
  /** base step time (a decode step at batch 1), ms */
  decodeMs: number;
  /** added per decoding sequence beyond the first, ms */
  decodeMsPerSeq: number;
  /** fixed scheduler/launch overhead per step, ms */
  stepOverheadMs: number;
  maxLoras: number;
  loraLoadMs: number;
  loras: string[];
  maxModelLen: number;
  /** optional: attention cost per 1,000 KV tokens of decoding sequences, ms (default 0.04) */
  decodeMsPer1kCtx?: number;
}

export const DEFAULT_PROFILE: EngineProfile = Object.freeze({
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  numGpuBlocks: 25000,
  blockSize: 16,
  prefillTokensPerS: 16000,
  decodeMs: 11,
  decodeMsPerSeq: 0.07,
  stepOverheadMs: 1,
  maxLoras: 1,
  loraLoadMs: 30,
  loras: [] as string[],
  maxModelLen: 131072,
  decodeMsPer1kCtx: 0.04,
}) as EngineProfile;

/** Cost of one step. */
export function stepCostMs(
  p: EngineProfile,
  prefillTokens: number,
  decodeSeqs: number,
  decodeCtxTokens: number,
  loraLoads: number,
): number {
  return (
    p.stepOverheadMs +
    p.decodeMs +
    (decodeSeqs > 1 ? p.decodeMsPerSeq * (decodeSeqs - 1) : 0) +
    ((p.decodeMsPer1kCtx ?? 0) * decodeCtxTokens) / 1000 +
    (prefillTokens * 1000) / p.prefillTokensPerS +
    loraLoads * p.loraLoadMs
  );
}
