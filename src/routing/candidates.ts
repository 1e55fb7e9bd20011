/**
 * The candidate table: one row per endpoint a pick may use, with the load figures every scorer, the
 * saturation test and the policies read, computed once per pick. Its columns are reused from pick to pick
 * (pick is synchronous and never re-entered), so building the table allocates nothing. Also the per-endpoint
 * estimates behind those figures (freshness, waiting, queued prefill work, waits for slots), which the
 * pool's debug view shares.
 */
import type { EndpointState } from './endpoint-state.js';
import type { PoolOptions } from './options.js';
import { isSaturated, kvTakesCached, overBacklogBound, prefillBacklogMs, queued } from './saturation.js';
import type { Tuning } from './tuning.js';

/**
 * One row per candidate, a typed column per figure (struct of arrays: the scorers' loops read plain numbers,
 * no object per candidate). Row i is `st[i]`; the columns hold `n` rows.
 */
export class CandidateTable {
  /** rows in this pick */
  n = 0;
  /** the endpoint of each row */
  readonly st: EndpointState[] = [];
  /** 1: the row's signals are recent enough to use */
  fresh = new Uint8Array(64);
  /** 1: the row is saturated (see saturation.ts) */
  saturated = new Uint8Array(64);
  /** requests waiting on the evidence (saturation.ts `queued`): what the saturation test and Retry-After read */
  queued = new Float64Array(64);
  /** running sequences, estimated */
  running = new Float64Array(64);
  /** KV-cache use 0..1; NaN when the signals are stale */
  kv = new Float64Array(64);
  /** prefix blocks the endpoint likely holds */
  matched = new Float64Array(64);
  /** prefill work queued ahead of this request, in prompt tokens */
  ahead = new Float64Array(64);
  /** that work's prompt tokens in time at the endpoint's observed prefill speed (ms; 0: speed not observed) */
  backlogMs = new Float64Array(64);
  /** estimated time to first token, in prompt tokens of prefill work (this request's included) */
  cost = new Float64Array(64);
  /**
   * while every candidate has prefill work ahead, the cost less Tuning.cacheCredit × the prompt tokens the
   * endpoint's cache saves (at least 0); otherwise the cost. What the scored policy's load factor compares
   */
  credited = new Float64Array(64);
  /** prefix blocks of the prompt (0: too short to have one) */
  totalBlocks = 0;
  /** the LoRA adapter requested, or null for a base-model request */
  adapter: string | null = null;
  // over the unsaturated rows: the least of each load figure, and the free KV share summed over those with
  // fresh signals (and their count), which the scorers and the scored policy compare against
  minAhead = 0;
  minRunning = 0;
  minInFlight = 0;
  minCost = 0;
  minCredited = 0;
  freshKvFree = 0;
  freshCount = 0;

  // the pick's prompt, for uncachedAt
  private promptTokens = 0;
  private charsPerToken = 1;
  private blockChars = 1;

  constructor(readonly tuning: Tuning) {}

  /** Prompt tokens row i would have to prefill (the rest is in its KV cache). */
  uncachedAt(i: number): number {
    return uncachedTokens(this.promptTokens, this.matched[i], this.blockChars, this.charsPerToken);
  }

  /** Waiting requests on row i's endpoint, estimated for scoring (the saturation test reads `queued`). */
  waitingAt(i: number): number {
    return waitingEstimate(this.st[i], this.fresh[i] === 1);
  }

  /** Room for n rows (the columns grow by doubling and are reused from pick to pick). */
  reserve(n: number): void {
    if (n <= this.cost.length) return;
    let size = this.cost.length;
    while (size < n) size *= 2;
    this.fresh = new Uint8Array(size);
    this.saturated = new Uint8Array(size);
    this.queued = new Float64Array(size);
    this.running = new Float64Array(size);
    this.kv = new Float64Array(size);
    this.matched = new Float64Array(size);
    this.ahead = new Float64Array(size);
    this.backlogMs = new Float64Array(size);
    this.cost = new Float64Array(size);
    this.credited = new Float64Array(size);
  }

  /**
   * Fill the table for `list` (match: matched blocks by endpoint id). Returns whether the pool is saturated:
   * every candidate saturated or over the prefill-backlog bound (saturation.ts).
   */
  build(
    list: readonly EndpointState[],
    match: Int32Array,
    opts: PoolOptions,
    promptTokens: number,
    charsPerToken: number,
    now: number,
  ): boolean {
    const bc = opts.prefix.block_chars;
    const qd = opts.saturation.queue_depth;
    const kvT = opts.saturation.kv_cache;
    const maxBacklog = opts.saturation.max_prefill_backlog;
    const staleAfter = opts.metrics.stale_after;
    const t = this.tuning;
    const floorTok = t.requestFloorTokens;
    const runTok = t.runCostTokens;
    const credit = t.cacheCredit;
    const adapter = this.adapter;
    const n = list.length;
    this.reserve(n);
    this.n = n;
    const rowSt = this.st;
    rowSt.length = n;
    // the columns, read once (every store below is to a local typed array, not through `this`)
    const { fresh: freshCol, saturated: saturatedCol, queued: queuedCol, running: runningCol, kv: kvCol, matched: matchedCol, ahead: aheadCol, backlogMs: backlogCol, cost: costCol, credited: creditedCol } = this;
    this.promptTokens = promptTokens;
    this.charsPerToken = charsPerToken;
    this.blockChars = bc;
    let allOut = true;
    let minAhead = Infinity;
    let minRunning = Infinity;
    let minInFlight = Infinity;
    let minCost = Infinity;
    let minCredited = Infinity;
    let freshKvFree = 0;
    let freshCount = 0;
    for (let i = 0; i < n; i++) {
      const st = list[i];
      const sig = st.sig;
      const fresh = isFresh(st, now, staleAfter);
      const waiting = waitingEstimate(st, fresh);
      const running = fresh ? Math.max(sig!.running, st.decoding) : st.decoding;
      const kv = fresh ? sig!.kvUsage : NaN;
      const matched = match[st.id];
      const foreign = fresh ? foreignWaiting(st) : 0;
      // requests queued ahead: each costs its prefill (ours: uncached tokens less observed progress; others:
      // an assumed prompt) plus a floor, the step that gives it its first token
      const prefill = prefillAheadTokens(st, fresh, now, t);
      const ahead = prefill + (st.pending + foreign) * floorTok;
      const backlog = prefillBacklogMs(st, prefill);
      const uncached = uncachedTokens(promptTokens, matched, bc, charsPerToken);
      let cost = ahead + uncached + floorTok + running * runTok;
      // decode slots: with the endpoint's batch full, this request waits for sequences to finish, one slot per
      // decode time / capacity on average
      const occupied = running + waiting + 1;
      let waitMs = 0;
      if (occupied > st.capacity) waitMs = ((occupied - st.capacity) * (st.decodeMs > 0 ? st.decodeMs : t.decodeMs)) / st.capacity;
      if (adapter !== null) waitMs += adapterWaitMs(st, adapter, now, t);
      // a wait in token equivalents, never at less than the assumed prefill speed: one slow first token (a
      // tiny prompt whose time is all floor, an adapter load) must not make every later wait here look free
      if (waitMs > 0) cost += waitMs * Math.max(tokensPerMs(st, t), t.prefillTokensPerMs);
      const q = queued(st, fresh, now, t, maxBacklog);
      // over the KV threshold, an endpoint still takes a request whose prompt it mostly holds (saturation.ts)
      const saturated =
        isSaturated(q, fresh, NaN, qd, 0) || (isSaturated(0, fresh, kv, 0, kvT) && !kvTakesCached(st, promptTokens, uncached, prefill, t.kvHeldShare));
      // over the backlog bound (the work ahead and up to ownPrefillShare of the bound of this request's own
      // prefill: a long prompt is over it sooner): counts for the pool's refusal, but stays a candidate while
      // another is under it (its cost carries the backlog, weighed against what its cached prefix saves)
      if (!saturated && !overBacklogBound(st, backlog, uncached, maxBacklog, t.ownPrefillShare)) allOut = false;
      rowSt[i] = st;
      freshCol[i] = fresh ? 1 : 0;
      saturatedCol[i] = saturated ? 1 : 0;
      queuedCol[i] = q;
      runningCol[i] = running;
      kvCol[i] = kv;
      matchedCol[i] = matched;
      aheadCol[i] = ahead;
      backlogCol[i] = backlog;
      costCol[i] = cost;
      // a cached prefix is work not done: credit it (again: its effect on this TTFT is in the cost already)
      const credited = credit > 0 && uncached < promptTokens ? Math.max(0, cost - credit * (promptTokens - uncached)) : cost;
      creditedCol[i] = credited;
      if (saturated) continue;
      if (fresh) {
        freshKvFree += 1 - kv;
        freshCount++;
      }
      if (running < minRunning) minRunning = running;
      const inFlight = st.inFlight + st.remoteInFlight;
      if (inFlight < minInFlight) minInFlight = inFlight;
      if (cost < minCost) minCost = cost;
      if (credited < minCredited) minCredited = credited;
      if (ahead < minAhead) minAhead = ahead;
    }
    this.minAhead = minAhead;
    this.minRunning = minRunning;
    this.minInFlight = minInFlight;
    this.minCost = minCost;
    this.minCredited = minCredited;
    // the credit only while every candidate has prefill work ahead: with one free to start at once, a cold
    // prefill there costs no one a wait, and a burst on one prefix spreads as before
    if (!(minAhead > 0) && credit > 0) {
      creditedCol.set(costCol.subarray(0, n));
      this.minCredited = minCost;
    }
    this.freshKvFree = freshKvFree;
    this.freshCount = freshCount;
    return allOut;
  }
}

/** Prompt tokens not covered by `matched` cached blocks (never below 0). */
function uncachedTokens(promptTokens: number, matched: number, blockChars: number, charsPerToken: number): number {
  const rest = promptTokens - (matched * blockChars) / charsPerToken;
  return rest > 0 ? rest : 0;
}

/** Signals recent enough to use. */
export function isFresh(st: EndpointState, now: number, staleAfter: number): boolean {
  return st.sig !== null && now - st.sigAt <= staleAfter;
}

/**
 * Waiting requests on an endpoint as the cost and scorers see them: fresh metrics plus what we sent since,
 * or our own accounting. Deliberately pessimistic, so that a burst spreads before a scrape shows it; the
 * saturation test does not use it (it reads the evidence: saturation.ts `queued`).
 */
export function waitingEstimate(st: EndpointState, fresh: boolean): number {
  // of our pending requests, about one is being prefilled and the rest wait
  if (!fresh) return Math.max(0, st.pending - 1);
  // fresh: the scrape saw our earlier requests (waiting, or already running: with chunked prefill several
  // prefill at once), so only those sent since are added. (Those that left the queue since are not taken
  // off here: that would change how every policy sheds load; the cost does it instead.)
  const w = st.sig!.waiting;
  return w + Math.max(0, st.sinceScrape - (w === 0 ? 1 : 0));
}

/**
 * Prompt tokens of prefill queued ahead of a new request on an endpoint: ours still to do (queuedTokens), and
 * with fresh metrics an assumed prompt for each waiting request that is not ours. The cost's `ahead` adds a
 * per-request floor to it; the saturation test turns it into time (saturation.ts `prefillBacklogMs`).
 */
export function prefillAheadTokens(st: EndpointState, fresh: boolean, now: number, t: Tuning): number {
  return queuedTokens(st, now) + (fresh ? foreignWaiting(st) : 0) * t.foreignPromptTokens;
}

/**
 * Uncached prompt tokens of our pending requests still to prefill: their sum, less what the endpoint has
 * likely done on the head request since it got there (its observed prefill speed × the time).
 */
function queuedTokens(st: EndpointState, now: number): number {
  if (st.pending === 0 || st.prefillMs <= 0) return st.pendingTokens;
  const done = (st.prefillTok / st.prefillMs) * Math.max(0, now - st.busySince);
  return Math.max(0, st.pendingTokens - done);
}

/**
 * Waiting requests in the last scrape that are not ours: our pending requests at scrape time may be among
 * the waiting ones; requests of ours that finished since must not turn into someone else's queue.
 */
function foreignWaiting(st: EndpointState): number {
  return Math.max(0, st.sig!.waiting - st.pendingAtScrape);
}

/** ms → prompt-token equivalents at the endpoint's observed prefill speed (or the assumed one). */
function tokensPerMs(st: EndpointState, t: Tuning): number {
  return st.prefillMs > 0 && st.prefillTok > 0 ? st.prefillTok / st.prefillMs : t.prefillTokensPerMs;
}

/**
 * How long an adapter request waits for a LoRA slot here (ms): 0 when the adapter is resident, the load
 * time when a slot is free, else until the sequences of the resident adapters finish — at least a whole
 * decode, and at least as long again as our oldest such sequence has already run (long ones run long).
 */
function adapterWaitMs(st: EndpointState, adapter: string, now: number, t: Tuning): number {
  const s = st.sig;
  if (!s) return 0; // unknown: the lora scorer's neutral value covers it
  if (s.loraRunning.includes(adapter)) return 0;
  if (s.maxLoras <= 0 || s.loraRunning.length < s.maxLoras) return t.loraLoadMs;
  let wait = st.decodeMs > 0 ? st.decodeMs : t.decodeMs;
  for (const tk of st.adapterTickets) {
    if (tk.adapter !== adapter && now - tk.firstByteAt > wait) wait = now - tk.firstByteAt;
  }
  return wait + t.loraLoadMs;
}
