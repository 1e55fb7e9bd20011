/**
 * The discrete-event loop: N simulated engines (src/engine, unchanged) advanced in virtual time, one
 * policy choosing where each arrival goes, metrics "scraped" from every engine each scrape interval (with
 * a fixed per-endpoint phase, so signals are as stale as in life), and the policy's own accounting told
 * about first bytes and ends at the virtual times they happen. What happened is counted by run-stats.ts.
 *
 * Events at the same instant run in a fixed order: engine step ends, then scrapes, then arrivals, then
 * queue expiries (ties by insertion order); nothing reads the wall clock or Math.random.
 *
 * With `queue` the loop models the gateway's flow control (src/gateway/flow.ts) with the same pure
 * WaitQueue: a saturated pick refuses a sheddable request and queues the others (a newcomer queues behind
 * waiters of its class or higher); the head is picked again whenever capacity may have freed (a first
 * token, an end, a scrape) and a waiter past max_wait is refused.
 */
import { Engine, tokenize, type EngineProfile, type EngineSnapshot } from '../engine/index.js';
import { EventQueue } from './heap.js';
import { RunStats, type RequestRecord } from './run-stats.js';
import type { SloSpec } from './slo.js';
import { traceTokens } from './trace.js';
import { WaitQueue, type Waiter } from '../routing/index.js';
import type { RunResult, SimRequest } from './types.js';

export interface PickContext {
  /** index of the request in the workload */
  index: number;
  req: SimRequest;
  /** the prompt's token ids as the engines see them */
  tokens: Uint32Array;
  now: number;
}

export type PickOutcome =
  | { kind: 'ok'; endpoint: number; ticket?: unknown }
  | { kind: 'saturated'; retryAfterS?: number }
  | { kind: 'unavailable' };

/** A routing policy as the loop drives it. */
export interface SimPolicy {
  readonly name: string;
  pick(ctx: PickContext): PickOutcome;
  /** the first response byte (first token) came back */
  onFirstByte?(ticket: unknown, now: number): void;
  /** the response ended (ok) or failed */
  onEnd?(ticket: unknown, now: number, ok: boolean): void;
  /** a metrics scrape of endpoint `i` */
  onScrape?(i: number, snap: EngineSnapshot, now: number): void;
}

export interface LoopOptions {
  endpoints: number;
  profile: Partial<EngineProfile>;
  /** virtual ms between two scrapes of one endpoint (the pool's metrics.interval) */
  scrapeIntervalMs: number;
  /** called once per request when it ends (completed, rejected or error), in virtual-time order */
  record?: (rec: RequestRecord) => void;
  /** the latency objectives for attainment and goodput (default DEFAULT_SLOS) */
  slos?: readonly SloSpec[];
  /** the gateway's wait queue (pools.<p>.queue); absent or max_length 0: a saturated pick is refused */
  queue?: { maxLength: number; maxWaitMs: number };
}

/** The token ids the engine sees for a request (tokenize(prompt) when a literal prompt is given). */
export function requestTokens(req: SimRequest): Uint32Array {
  return req.prompt !== undefined ? tokenize(req.prompt) : traceTokens(req.hashIds, req.inputTokens);
}

// event kinds, in the order events at one instant run
const K_STEP = 0;
const K_SCRAPE = 1;
const K_ARRIVAL = 2;
const K_EXPIRE = 3;

/**
 * Replays `requests` (sorted by arrival) with the policy that `makePolicy` builds over the fresh engines.
 */
export function runLoop(
  requests: readonly SimRequest[],
  makePolicy: (engines: readonly Engine[]) => SimPolicy,
  opts: LoopOptions,
): RunResult {
  const n = requests.length;
  const engines: Engine[] = [];
  for (let i = 0; i < opts.endpoints; i++) engines.push(new Engine(opts.profile));
  const policy = makePolicy(engines);
  const stats = new RunStats(requests, opts.endpoints, opts.record, opts.slos);
  const q = new EventQueue();
  const stepping = new Uint8Array(opts.endpoints);
  const tickets: unknown[] = new Array(n);
  let inFlight = 0;
  let arrived = 0;
  const queueOpts = opts.queue && opts.queue.maxLength > 0 ? opts.queue : undefined;
  const waiting = queueOpts ? new WaitQueue<number>(queueOpts.maxLength) : undefined;
  const waiterOf = new Map<number, { w: Waiter<number>; tokens: Uint32Array }>();

  for (let i = 0; i < n; i++) q.push(requests[i].arrivalMs, K_ARRIVAL, i);
  const interval = Math.max(1, opts.scrapeIntervalMs);
  const firstArrival = n > 0 ? requests[0].arrivalMs : 0;
  for (let e = 0; e < opts.endpoints; e++) {
    // every endpoint is scraped once before traffic starts, then with its own phase
    const phase = (interval * e) / opts.endpoints;
    policy.onScrape?.(e, engines[e].snapshot(), firstArrival);
    q.push(firstArrival + phase + interval, K_SCRAPE, e);
  }

  const kick = (e: number, now: number) => {
    if (stepping[e]) return;
    const d = engines[e].startStep(now);
    if (d !== null) {
      stepping[e] = 1;
      q.push(now + d, K_STEP, e);
    }
  };

  const stepEnd = (e: number, now: number) => {
    stepping[e] = 0;
    const events = engines[e].finishStep(now);
    let freed = false;
    for (const x of events) {
      const i = Number(x.id);
      switch (x.type) {
        case 'first_token':
          stats.firstToken(i, x.at, x.promptTokens, x.cachedTokens);
          policy.onFirstByte?.(tickets[i], x.at);
          freed = true;
          break;
        case 'token':
          stats.token(i, x.index, x.at);
          break;
        case 'finished':
          inFlight--;
          stats.completedAt(i, x.at, x.outputTokens);
          policy.onEnd?.(tickets[i], x.at, true);
          tickets[i] = undefined;
          freed = true;
          break;
        case 'preempted':
          stats.preempted();
          break;
        default:
          break;
      }
    }
    if (freed) drainQueue(now);
    kick(e, now);
  };

  const scrape = (e: number, now: number) => {
    policy.onScrape?.(e, engines[e].snapshot(), now);
    drainQueue(now);
    // keep scraping while traffic is pending; stop when the engines are done (or stuck: see below)
    if (arrived < n || (waiting !== undefined && waiting.length > 0) || (inFlight > 0 && stepping.some((x) => x === 1))) q.push(now + interval, K_SCRAPE, e);
  };

  const arrival = (i: number, now: number) => {
    arrived++;
    const req = requests[i];
    const tokens = requestTokens(req);
    if (waiting?.hasWaiterAtOrAbove(req.priority ?? 'standard')) return enqueue(i, tokens, now);
    const r = policy.pick({ index: i, req, tokens, now });
    if (r.kind === 'saturated') return waiting ? enqueue(i, tokens, now) : stats.rejectedAt(i, now);
    if (r.kind === 'unavailable') return stats.failedAt(i, now);
    dispatch(i, r, tokens, now);
  };

  /** The pool is saturated for request i (or others wait before it): the gateway's queue, or a 429. */
  const enqueue = (i: number, tokens: Uint32Array, now: number) => {
    const req = requests[i];
    const prio = req.priority ?? 'standard';
    if (prio === 'sheddable') return stats.rejectedAt(i, now);
    const res = waiting!.push(i, prio, req.tenant ?? '', now);
    if (res.kind === 'full') return stats.rejectedAt(i, now);
    if (res.evicted) leaveQueue(res.evicted.item, now);
    waiterOf.set(i, { w: res.waiter, tokens });
    q.push(now + queueOpts!.maxWaitMs, K_EXPIRE, i);
    drainQueue(now);
  };

  /** Request i leaves the queue refused (its wait expired, or a more important one took its place). */
  const leaveQueue = (i: number, now: number) => {
    const slot = waiterOf.get(i);
    if (!slot) return; // dispatched already
    waiterOf.delete(i);
    waiting!.remove(slot.w);
    stats.waited(i, now - slot.w.since);
    stats.rejectedAt(i, now);
  };

  /** Capacity may have freed: the queue's head is picked again while the picker finds an endpoint. */
  const drainQueue = (now: number) => {
    if (!waiting) return;
    for (let w = waiting.peek(); w; w = waiting.peek()) {
      const i = w.item;
      const slot = waiterOf.get(i)!;
      const r = policy.pick({ index: i, req: requests[i], tokens: slot.tokens, now });
      if (r.kind === 'saturated') return;
      waiting.shift();
      waiterOf.delete(i);
      stats.waited(i, now - w.since);
      if (r.kind === 'unavailable') stats.failedAt(i, now);
      else dispatch(i, r, slot.tokens, now);
    }
  };

  const dispatch = (i: number, r: Extract<PickOutcome, { kind: 'ok' }>, tokens: Uint32Array, now: number) => {
    const req = requests[i];
    const e = r.endpoint;
    tickets[i] = r.ticket;
    try {
      // as vLLM (and the mock): prompt + max_tokens beyond the context window is a 400
      const mp = engines[e].profile;
      if (tokens.length + req.outputTokens > mp.maxModelLen) throw new RangeError('context length exceeded');
      engines[e].add({ id: String(i), promptTokens: tokens, maxTokens: req.outputTokens, lora: req.lora }, now);
    } catch {
      // the server answers 400 (prompt too long, no LoRA support): an error for the client, but the
      // gateway relays a 4xx as a healthy upstream's answer (outcome ok: no ejection)
      policy.onEnd?.(r.ticket, now, true);
      tickets[i] = undefined;
      return stats.failedAt(i, now);
    }
    stats.dispatched(i, e);
    inFlight++;
    kick(e, now);
  };

  for (;;) {
    const ev = q.pop();
    if (!ev) break;
    if (ev.kind === K_STEP) stepEnd(ev.a, ev.t);
    else if (ev.kind === K_SCRAPE) scrape(ev.a, ev.t);
    else if (ev.kind === K_ARRIVAL) arrival(ev.a, ev.t);
    else leaveQueue(ev.a, ev.t);
  }

  // Requests an engine can never run (none expected) would otherwise vanish: count them as errors.
  return stats.result(policy.name, inFlight);
}
