/**
 * The routing API's types, shared by the gateway, the simulator and the scraper. Pure declarations.
 */
import type { PolicyName } from './policies/index.js';

/** One endpoint's scraped metrics, engine-independent (see src/signals/engines.ts for the name maps). */
export interface EndpointSignals {
  waiting: number;
  running: number;
  /** 0..1 */
  kvUsage: number;
  loraRunning: string[];
  loraWaiting: string[];
  maxLoras: number;
  /** tokens per KV block (vllm:cache_config_info block_size) */
  blockSize?: number;
  /** KV blocks on the GPU (vllm:cache_config_info num_gpu_blocks) */
  numGpuBlocks?: number;
  /**
   * sequences the endpoint batches at most (vLLM max_num_seqs), if known: beyond it a new request waits for
   * running ones to finish (the scored cost counts that wait)
   */
  maxNumSeqs?: number;
  /** LoRA adapter names the endpoint serves (from /v1/models `parent`), if known */
  adapters?: string[];
  /** the longest context its base model takes, in tokens (vLLM's /v1/models `max_model_len`), if known */
  maxModelLen?: number;
}

export interface PickInput {
  /** the model name to forward (after alias resolution); salts the prefix hashes */
  model: string;
  /**
   * renderPrompt(body) — the router cuts and hashes it itself; it reads at most max_blocks × block_chars
   * characters, so a caller may pass only those (and the whole length as promptChars)
   */
  promptText: string;
  /** the whole rendered prompt's length when promptText is cut short; default promptText.length */
  promptChars?: number;
  /** estimate of the prompt's tokens (chars/4) */
  promptTokens: number;
  /** endpoints not to use (already failed for this request) */
  exclude?: ReadonlySet<string>;
  /**
   * The endpoint this request must go to while it is usable (in the pool, not excluded, not ejected): it is
   * chosen over saturation and the policy (a Responses API follow-up whose stored answer only that server
   * holds). When it is not usable, the pick is made as if none were named.
   */
  prefer?: string;
  /**
   * Precomputed block-hash chain (from hashPrefixBlocks with this pool's block_chars, salt = model,
   * max_blocks); when given, promptText is not read.
   */
  prefixBlocks?: ArrayLike<number>;
}

export interface PickOptions {
  /** use this policy instead of the pool's configured one (simulator, benchmarks, shadow scoring) */
  policy?: PolicyName;
  /**
   * true: decide and explain only — no accounting, no index learning, no round-robin advance; the
   * returned ticket must not be passed to onFirstByte/onEnd (they ignore it). For shadow_policy.
   */
  dryRun?: boolean;
  /**
   * true: the pick's learning into the prefix index waits for Router.learn(ticket), which the gateway runs
   * once undici has written the request upstream, so the request does not wait for that bookkeeping. Routing is unchanged: any later call into the pool (the next pick, index reads, endpoint
   * changes) learns it first if learn() was not called.
   */
  deferLearn?: boolean;
  /** true: fill PickResult.explain (costs a few µs; the gateway asks for it at debug level) */
  explain?: boolean;
}

/** A dispatched request's handle; pass it back to onFirstByte/onEnd. */
export interface Ticket {
  readonly endpoint: string;
  readonly pool: string;
}

export interface CandidateExplain {
  endpoint: string;
  /** each scorer's value in [0,1] (absent: scorer not applied) */
  scores: Record<string, number>;
  /** weighted mean of the scores */
  weighted: number;
  /** estimated time-to-first-token cost, in prompt tokens of prefill work ahead of and including this request */
  cost: number;
  /**
   * (least credited cost + c0) / (credited cost + c0), in (0,1]: the credited cost is `cost` less
   * Tuning.cacheCredit × the prompt tokens the endpoint's cache saves (at least 0)
   */
  loadFactor: number;
  /** weighted × loadFactor: the number that is maximised */
  total: number;
  matchedBlocks: number;
  stale: boolean;
}

export interface PickExplain {
  policy: PolicyName;
  pool: string;
  totalBlocks: number;
  candidates: CandidateExplain[];
  /** endpoints left out, and why */
  filtered: Array<{ endpoint: string; why: string }>;
  winner?: string;
  /** true: the winner is PickInput.prefer, chosen without saturation or policy */
  pinned?: boolean;
}

export type PickResult =
  | { kind: 'ok'; endpoint: string; ticket: Ticket; explain?: PickExplain; /** PickInput.prefer was usable, and chosen */ pinned?: boolean }
  | { kind: 'saturated'; retryAfterS: number; explain?: PickExplain }
  | { kind: 'unavailable' };

export type Outcome = 'ok' | 'error' | 'aborted';
