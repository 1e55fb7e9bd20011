/**
 * What one mock server shows on `GET /metrics`: vLLM's metric names, help texts and labels, built from
 * the engine's snapshot plus the latency histograms and finish counts the server observes (in model
 * time, as a real vLLM would see them). The text format itself is in prom.ts.
 */
import type { EngineSnapshot } from '../engine/index.js';
import { counter, gauge, Histogram, ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS } from './prom.js';

/** The content type vLLM's prometheus_client answers with. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Why a request left the engine, as `vllm:request_success_total{finished_reason}` counts it. */
export type FinishedReason = 'stop' | 'length' | 'abort';

export class VllmMetrics {
  /** seconds from arrival to the first token */
  readonly ttft = new Histogram(TTFT_BUCKETS);
  /** seconds between two tokens of a request */
  readonly itl = new Histogram(ITL_BUCKETS);
  /** seconds from arrival to the last token */
  readonly e2e = new Histogram(REQUEST_LATENCY_BUCKETS);
  /** seconds from arrival to the first scheduling */
  readonly queue = new Histogram(REQUEST_LATENCY_BUCKETS);
  private readonly finished = new Map<FinishedReason, number>([
    ['stop', 0],
    ['length', 0],
    ['abort', 0],
  ]);

  countFinished(reason: FinishedReason): void {
    this.finished.set(reason, (this.finished.get(reason) ?? 0) + 1);
  }

  /** The exposition text for `model`; `wallS` is the wall clock in seconds (vLLM's lora info value). */
  text(s: EngineSnapshot, model: string, wallS: number): string {
    const L = { model_name: model, engine: '0' };
    let out = '';
    out += gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', [[L, s.running]]);
    out += gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', [[L, s.waiting]]);
    out += gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', [[L, s.kvUsage]]);
    out += gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage. (deprecated: use vllm:kv_cache_usage_perc)', [[L, s.kvUsage]]);
    out += counter('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.', [[L, s.prefixQueries]]);
    out += counter('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.', [[L, s.prefixHits]]);
    out += counter('vllm:gpu_prefix_cache_queries_total', 'GPU prefix cache queries, in terms of number of queried tokens. (deprecated)', [[L, s.prefixQueries]]);
    out += counter('vllm:gpu_prefix_cache_hits_total', 'GPU prefix cache hits, in terms of number of cached tokens. (deprecated)', [[L, s.prefixHits]]);
    out += counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.', [[L, s.preemptionsTotal]]);
    out += counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.', [[L, s.promptTokensTotal]]);
    out += counter('vllm:generation_tokens_total', 'Number of generation tokens processed.', [[L, s.generationTokensTotal]]);
    out += counter(
      'vllm:request_success_total',
      'Count of successfully processed requests.',
      [...this.finished].map(([reason, v]) => [{ ...L, finished_reason: reason }, v] as [Record<string, string>, number]),
    );
    out += gauge('vllm:lora_requests_info', 'Running stats on lora requests.', [
      [
        {
          max_lora: String(s.maxLoras),
          running_lora_adapters: s.loraRunning.join(','),
          waiting_lora_adapters: s.loraWaiting.join(','),
        },
        wallS,
      ],
    ]);
    out += gauge('vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', [
      [
        {
          block_size: String(s.blockSize),
          cache_dtype: 'auto',
          enable_prefix_caching: 'True',
          engine: '0',
          gpu_memory_utilization: '0.9',
          num_cpu_blocks: '0',
          num_gpu_blocks: String(s.numGpuBlocks),
          prefix_caching_hash_algo: 'builtin',
        },
        1,
      ],
    ]);
    out += this.ttft.render('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', L);
    out += this.itl.render('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', L);
    out += this.itl.render('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds. (deprecated: use vllm:inter_token_latency_seconds)', L);
    out += this.e2e.render('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', L);
    out += this.queue.render('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', L);
    return out;
  }
}
