import type { OfferedFigures } from './slo.js';
import type { PriorityClass } from '../routing/index.js';
import type { ClassFigures } from './priority.js';
/** Shapes shared by the simulator's parts (trace loader, generators, loop, result JSON). */

/** One request to replay: the Mooncake trace's fields, in camelCase, plus optional adapter/model. */
export interface SimRequest {
  /** Arrival time in milliseconds from the start of the workload. */
  arrivalMs: number;
  /** Prompt length in tokens. */
  inputTokens: number;
  /** Completion length in tokens (the engine is asked for exactly this many: max_tokens, no early stop). */
  outputTokens: number;
  /** The prompt as a chain of 512-token blocks (TRACE_BLOCK_TOKENS); the last one may be partial. */
  hashIds: number[];
  /** A LoRA adapter name (lora-mix); the request then asks for that model. */
  lora?: string;
  /** The model the client asks for; defaults to the simulated pool's model. */
  model?: string;
  /**
   * A literal prompt text. When set, the engine sees tokenize(prompt) and the router hashes this text,
   * exactly as the live gateway and the HTTP mock would (used to compare the simulator with the mock).
   */
  prompt?: string;
  /** Its flow-control class (simulate --priority-mix); none: standard. */
  priority?: PriorityClass;
  /** Its tenant, for the wait queue's turns (none: one tenant for all). */
  tenant?: string;
}

export interface Summary {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

/**
 * The figures of one policy's run, as shared/spec/README.md defines them (simulate and the benchmarks);
 * the figures over offered requests (shed share, SLO attainment and goodput, TTFT counting the shed as
 * infinitely slow) are in ./slo.ts.
 */
export interface RunFigures extends Partial<OfferedFigures> {
  policy: string;
  requests: number;
  completed: number;
  errors: number;
  rejected: number;
  ttft_ms: Summary;
  itl_ms: Summary;
  e2e_ms: Summary;
  throughput_rps: number;
  output_tokens_per_s: number;
  prefix_cache_hit_rate: number;
  /**
   * The gap between tokens per request, beside `itl_ms` (every gap of every request pooled): each completed
   * request's mean gap and its own p99 gap, and the distribution of each over those requests (those with at
   * least two output tokens, counted in `requests`). A request's mean gap is what `--slo-itl` bounds.
   */
  itl_per_request_ms?: PerRequestItl;
}

export interface PerRequestItl {
  requests: number;
  mean: Summary;
  p99: Summary;
}

/** One simulated policy's run: the spec's figures plus the simulator's extras. */
export interface RunResult extends Omit<RunFigures, keyof OfferedFigures>, OfferedFigures {
  /** Extras: preemptions seen, queueing at arrival, virtual duration. */
  preemptions: number;
  duration_s: number;
  /** Requests per endpoint (index order), to see imbalance. */
  per_endpoint: number[];
  /** With classes in the workload (--priority-mix): each class's figures. */
  per_priority?: Record<PriorityClass, ClassFigures>;
}

export interface SimResult {
  workload: {
    trace: string;
    requests: number;
    endpoints: number;
    seed: number;
    rate_scale: number;
    /** with several gateway replicas (simulate --replicas N > 1) */
    replicas?: number;
    share?: 'none' | 'events' | 'events+inflight';
    share_delay_ms?: number;
    /** share events+inflight: in-flight counts sent at the end of each period of this many ms (0: every change) */
    inflight_period_ms?: number;
    spread?: 'round_robin' | 'random';
    /** the classes' shares (--priority-mix) and the gateway's wait queue (--queue-max-length, --queue-max-wait) */
    priority_mix?: Record<PriorityClass, number>;
    queue?: { max_length: number; max_wait_ms: number };
    engine: Record<string, unknown>;
  };
  runs: RunResult[];
}
