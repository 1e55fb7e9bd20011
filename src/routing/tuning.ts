/**
 * The scored policy's constants that are not config keys (yet): the simulator tunes them, tests and
 * benchmarks may override them through RouterOptions.tuning. Pure data.
 */
import { CHARS_PER_TOKEN } from '../openai/tokens.js';

export interface Tuning {
  /** TTFT cost of one running (decoding) sequence on an endpoint, in prompt-token equivalents */
  runCostTokens: number;
  /** added to both sides of the load factor so that tiny costs at idle do not swing decisions */
  idleCostTokens: number;
  /**
   * The scored policy's load factor counts each prompt token an endpoint's cache likely holds this many times
   * against that endpoint's cost, beyond the saving already in its estimated TTFT: a cache hit is prefill
   * work no later request waits behind, so under load it is capacity, and affinity should hold there. Only
   * while every candidate has prefill work queued (candidates.ts). 0: off
   */
  cacheCredit: number;
  /**
   * The prefill-backlog bound counts up to this share of max_prefill_backlog of the request's own prefill
   * (its uncached prompt, in time at the endpoint's observed speed) on top of the work queued ahead: under
   * load a long prompt is refused sooner than a short one, so that when the pool must shed, it sheds the
   * requests whose prefill costs the most (saturation.ts). Below 1, so a pod with nothing queued still takes
   * any prompt. 0: the bound reads the queue ahead alone
   */
  ownPrefillShare: number;
  /**
   * An endpoint over the KV-cache threshold stays a candidate for a request whose prompt it holds at least
   * this share of in its cache, while its free KV holds the prefill queued ahead and the prompt's uncached
   * part (saturation.ts `kvTakesCached`): the request needs few new blocks there, evicts little, and is work
   * the other endpoints would prefill whole. Above 1: off
   */
  kvHeldShare: number;
  /** prompt tokens assumed per queued request the gateway did not send itself (seen only in metrics) */
  foreignPromptTokens: number;
  /**
   * TTFT floor of each request queued ahead (scheduling + its first decode step), in prompt-token
   * equivalents: a prefix-matched request has almost no prefill but still takes a step (≈ 12 ms at 16k tok/s)
   */
  requestFloorTokens: number;
  /** prefill speed assumed before an endpoint's is observed (tokens per ms), to turn waits into tokens */
  prefillTokensPerMs: number;
  /** whole-decode time of a request assumed before one has ended on the endpoint (ms) */
  decodeMs: number;
  /**
   * batch capacity the saturation test assumes for an endpoint whose max_num_seqs is neither configured nor
   * reported (vLLM's default, 256): a burst bigger than that per endpoint between two scrapes is not admitted
   * whole on no evidence at all. 0: none (unbounded until a scrape or a late first byte shows a queue)
   */
  assumedBatchCapacity: number;
  /** time to first byte assumed before one is observed on an endpoint (ms): see overdueTtftFactor */
  ttftMs: number;
  /**
   * a request of ours still without a first byte after this many times the endpoint's recent TTFT counts as
   * waiting there (saturation evidence that needs no scrape)
   */
  overdueTtftFactor: number;
  /**
   * ...but never sooner than this (ms): a first byte the gateway's own busy event loop has not handled yet
   * is no evidence of a queue at the endpoint
   */
  overdueMinMs: number;
  /** time to load a LoRA adapter into a free slot (ms) */
  loraLoadMs: number;
  /** consecutive errors that eject an endpoint */
  ejectAfterErrors: number;
  /** first ejection length; doubles per repeat, up to ejectMaxMs */
  ejectBaseMs: number;
  ejectMaxMs: number;
  /** chars per token when only prefixBlocks (no text) are given */
  charsPerToken: number;
  /**
   * the prefix index keeps every indexStride-th block (see PrefixIndexOptions.stride); 0 = auto: about
   * indexGrainChars characters per indexed level
   */
  indexStride: number;
  indexGrainChars: number;
}

export const DEFAULT_TUNING: Tuning = {
  runCostTokens: 16,
  idleCostTokens: 64,
  cacheCredit: 2,
  ownPrefillShare: 0.5,
  kvHeldShare: 0.5,
  foreignPromptTokens: 512,
  requestFloorTokens: 192,
  prefillTokensPerMs: 16,
  decodeMs: 2_000,
  assumedBatchCapacity: 256,
  ttftMs: 1_000,
  overdueTtftFactor: 2,
  overdueMinMs: 250,
  loraLoadMs: 30,
  ejectAfterErrors: 3,
  ejectBaseMs: 5_000,
  ejectMaxMs: 60_000,
  charsPerToken: CHARS_PER_TOKEN,
  indexStride: 0,
  indexGrainChars: 512,
};
