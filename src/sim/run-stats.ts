/**
 * The statistics of one simulated run: what happened to each request (dispatch, first token, tokens, end,
 * rejection, error), gathered as the loop reports it, into the run's figures (latency summaries over
 * completed requests, throughput over the virtual time from the first arrival to the last end) and, for
 * callers that compare per request, one `RequestRecord` per request when it ends.
 */
import { DEFAULT_SLOS, offeredFigures, type SloSpec } from './slo.js';
import { Samples, perRequestItl, round, summarize } from './stats.js';
import type { RunResult, SimRequest } from './types.js';
import { FATE_ERROR, FATE_REJECTED, classFigures } from './priority.js';

/** One request's fate, for callers that compare per request (e.g. live vs simulated). */
export interface RequestRecord {
  index: number;
  outcome: 'completed' | 'rejected' | 'error';
  /** -1 when not dispatched */
  endpoint: number;
  ttftMs: number;
  e2eMs: number;
  cachedTokens: number;
  outputTokens: number;
}

const NONE = -1;

export class RunStats {
  private readonly endpointOf: Int32Array;
  private readonly firstAt: Float64Array;
  private readonly lastAt: Float64Array;
  private readonly cachedOf: Float64Array;
  /** per request: mean gap between its tokens, set when it completes (NaN otherwise) */
  private readonly meanItlOf: Float64Array;
  /** per request: its TTFT if it completed (NaN otherwise) */
  private readonly doneTtftOf: Float64Array;
  private readonly perEndpoint: number[];
  /** per request: rejected or failed (priority.ts FATE_*), and its wait in the gateway's queue (NaN: none) */
  private readonly fateOf: Uint8Array;
  private readonly queueWaitOf: Float64Array;
  private readonly ttft = new Samples();
  private readonly itl = new Samples();
  /** the request each `itl` sample belongs to, for the per-request figures */
  private readonly itlOwner = new Samples();
  private readonly e2e = new Samples();
  private completed = 0;
  private errors = 0;
  private rejected = 0;
  private preemptions = 0;
  private outputTokens = 0;
  private promptTokens = 0;
  private cachedTokens = 0;
  private lastEnd = 0;
  private readonly firstArrival: number;

  /** `record` is called once per request when it ends, in the order the loop reports the ends. */
  constructor(
    private readonly requests: readonly SimRequest[],
    endpoints: number,
    private readonly record?: (rec: RequestRecord) => void,
    private readonly slos: readonly SloSpec[] = DEFAULT_SLOS,
  ) {
    const n = requests.length;
    this.endpointOf = new Int32Array(n).fill(NONE);
    this.firstAt = new Float64Array(n).fill(NaN);
    this.lastAt = new Float64Array(n).fill(NaN);
    this.cachedOf = new Float64Array(n);
    this.meanItlOf = new Float64Array(n).fill(NaN);
    this.doneTtftOf = new Float64Array(n).fill(NaN);
    this.perEndpoint = new Array<number>(endpoints).fill(0);
    this.fateOf = new Uint8Array(n);
    this.queueWaitOf = new Float64Array(n).fill(NaN);
    this.firstArrival = n > 0 ? requests[0].arrivalMs : 0;
  }

  /** Request `i` went to endpoint `e`. */
  dispatched(i: number, e: number): void {
    this.endpointOf[i] = e;
    this.perEndpoint[e]++;
  }

  firstToken(i: number, at: number, promptTokens: number, cachedTokens: number): void {
    this.firstAt[i] = at;
    this.lastAt[i] = at;
    this.ttft.push(at - this.requests[i].arrivalMs);
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.cachedOf[i] = cachedTokens;
  }

  /** Output token `index` of request `i` (the first one is counted by firstToken). */
  token(i: number, index: number, at: number): void {
    if (index > 0) {
      this.itl.push(at - this.lastAt[i]);
      this.itlOwner.push(i);
      this.lastAt[i] = at;
    }
  }

  completedAt(i: number, at: number, outputTokens: number): void {
    this.completed++;
    this.outputTokens += outputTokens;
    this.e2e.push(at - this.requests[i].arrivalMs);
    if (at > this.lastEnd) this.lastEnd = at;
    this.doneTtftOf[i] = this.firstAt[i] - this.requests[i].arrivalMs;
    this.meanItlOf[i] = outputTokens > 1 ? (this.lastAt[i] - this.firstAt[i]) / (outputTokens - 1) : 0;
    this.fate(i, 'completed', at, outputTokens);
  }

  preempted(): void {
    this.preemptions++;
  }

  /** Request `i` was turned away (429) at `now`. */
  rejectedAt(i: number, now: number): void {
    this.rejected++;
    this.fateOf[i] = FATE_REJECTED;
    this.fate(i, 'rejected', now);
  }

  /** Request `i` failed at `now` (no endpoint, or the server refused it). */
  failedAt(i: number, now: number): void {
    this.errors++;
    this.fateOf[i] = FATE_ERROR;
    this.fate(i, 'error', now);
  }

  /** Request `i` left the gateway's wait queue (dispatched, expired or displaced) after `ms`. */
  waited(i: number, ms: number): void {
    this.queueWaitOf[i] = ms;
  }

  /** The run's figures; `unfinished` requests (an engine never ran them) count as errors. */
  result(policy: string, unfinished: number): RunResult {
    const durationS = Math.max(1e-9, (this.lastEnd - this.firstArrival) / 1000);
    return {
      policy,
      requests: this.requests.length,
      completed: this.completed,
      errors: this.errors + unfinished,
      rejected: this.rejected,
      ttft_ms: summarize(this.ttft),
      itl_ms: summarize(this.itl),
      itl_per_request_ms: perRequestItl(this.gapsOfCompleted()),
      e2e_ms: summarize(this.e2e),
      throughput_rps: round(this.completed / durationS),
      output_tokens_per_s: round(this.outputTokens / durationS),
      prefix_cache_hit_rate: round(this.promptTokens > 0 ? this.cachedTokens / this.promptTokens : 0, 4),
      preemptions: this.preemptions,
      duration_s: round(durationS),
      per_endpoint: this.perEndpoint,
      ...perPriority(classFigures(this.requests, this.doneTtftOf, this.fateOf, this.queueWaitOf)),
      ...offeredFigures(this.doneTtftOf, this.meanItlOf, this.rejected, durationS, this.slos),
    };
  }

  /** Each completed request's gaps between tokens, as views of one array grouped by request. */
  private *gapsOfCompleted(): Generator<Float64Array> {
    const n = this.requests.length;
    const gaps = this.itl.values();
    const owners = this.itlOwner.values();
    const start = new Int32Array(n + 1);
    for (let k = 0; k < owners.length; k++) start[owners[k] + 1]++;
    for (let i = 0; i < n; i++) start[i + 1] += start[i];
    const fill = start.slice(0, n);
    const grouped = new Float64Array(gaps.length);
    for (let k = 0; k < gaps.length; k++) grouped[fill[owners[k]]++] = gaps[k];
    for (let i = 0; i < n; i++) {
      if (!Number.isNaN(this.doneTtftOf[i]) && start[i + 1] > start[i]) yield grouped.subarray(start[i], start[i + 1]);
    }
  }

  private fate(index: number, outcome: RequestRecord['outcome'], endAt: number, out = 0): void {
    if (!this.record) return;
    const arrival = this.requests[index].arrivalMs;
    this.record({
      index,
      outcome,
      endpoint: this.endpointOf[index],
      ttftMs: Number.isNaN(this.firstAt[index]) ? NaN : this.firstAt[index] - arrival,
      e2eMs: endAt - arrival,
      cachedTokens: this.cachedOf[index],
      outputTokens: out,
    });
  }
}

function perPriority(f: ReturnType<typeof classFigures>): Pick<RunResult, 'per_priority'> {
  return f ? { per_priority: f } : {};
}
