/**
 * The candidate table: one row per endpoint a pick may use, with the load figures every scorer, the
 * saturation test and the policies read, computed once per pick. Rows are reused from pick to pick (pick
 * is synchronous and never re-entered), so building the table allocates nothing. Also the per-endpoint
 * estimates behind those figures (freshness, waiting, queued prefill work, waits for slots), which the
 * pool's debug view shares.
 */
import type { EndpointState } from './endpoint-state.js';
import type { PoolOptions } from './options.js';
import { isSaturated } from './saturation.js';
import type { Tuning } from './tuning.js';

export class Candidate {
  fresh = false;
  waiting = 0;
  running = 0;
  /** KV-cache use 0..1; NaN when the signals are stale */
  kv = 0;
  saturated = false;
  /** prefix blocks the endpoint likely holds */
  matched = 0;
  /** prompt tokens it would have to prefill */
  uncached = 0;
  /** prefill work queued ahead of this request, in prompt tokens */
  ahead = 0;
  /** estimated time to first token, in prompt tokens of prefill work (this request's included) */
  cost = 0;
  constructor(public st: EndpointState) {}
}

/** What one pick is about, for the table and the scorers. */
export class CandidateTable {
  /** this pick's rows (a view into reused rows) */
  readonly cands: Candidate[] = [];
  /** prefix blocks of the prompt (0: too short to have one) */
  totalBlocks = 0;
  /** the LoRA adapter requested, or null for a base-model request */
  adapter: string | null = null;
  private readonly rows: Candidate[] = [];

  constructor(readonly tuning: Tuning) {}

  /**
   * Fill the table for `list` (match: matched blocks by endpoint id). Returns whether every candidate is
   * saturated.
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
    const staleAfter = opts.metrics.stale_after;
    const t = this.tuning;
    const foreignTok = t.foreignPromptTokens;
    const floorTok = t.requestFloorTokens;
    const runTok = t.runCostTokens;
    const adapter = this.adapter;
    const rows = this.rows;
    while (rows.length < list.length) rows.push(new Candidate(list[0]));
    const cands = this.cands;
    cands.length = list.length;
    let allSaturated = true;
    for (let i = 0; i < list.length; i++) {
      const st = list[i];
      const sig = st.sig;
      const fresh = isFresh(st, now, staleAfter);
      const waiting = waitingEstimate(st, fresh);
      const running = fresh ? Math.max(sig!.running, st.decoding) : st.decoding;
      const kv = fresh ? sig!.kvUsage : NaN;
      const saturated = isSaturated(waiting, fresh, kv, qd, kvT);
      const matched = match[st.id];
      const rest = promptTokens - (matched * bc) / charsPerToken;
      const uncached = rest > 0 ? rest : 0;
      const foreign = fresh ? foreignWaiting(st) : 0;
      // requests queued ahead: each costs its prefill (ours: uncached tokens less observed progress; others:
      // an assumed prompt) plus a floor, the step that gives it its first token
      const ahead = queuedTokens(st, now) + foreign * foreignTok + (st.pending + foreign) * floorTok;
      let cost = ahead + uncached + floorTok + running * runTok;
      // decode slots: with the endpoint's batch full, this request waits for sequences to finish, one slot per
      // decode time / capacity on average
      const occupied = running + waiting + 1;
      let waitMs = 0;
      if (occupied > st.capacity) waitMs = ((occupied - st.capacity) * (st.decodeMs > 0 ? st.decodeMs : t.decodeMs)) / st.capacity;
      if (adapter !== null) waitMs += adapterWaitMs(st, adapter, now, t);
      if (waitMs > 0) cost += waitMs * tokensPerMs(st, t);
      const c = rows[i];
      c.st = st;
      c.fresh = fresh;
      c.waiting = waiting;
      c.running = running;
      c.kv = kv;
      c.saturated = saturated;
      c.matched = matched;
      c.uncached = uncached;
      c.ahead = ahead;
      c.cost = cost;
      cands[i] = c;
      if (!saturated) allSaturated = false;
    }
    return allSaturated;
  }
}

/** Signals recent enough to use. */
export function isFresh(st: EndpointState, now: number, staleAfter: number): boolean {
  return st.sig !== null && now - st.sigAt <= staleAfter;
}

/** Waiting requests on an endpoint: fresh metrics plus what we sent since, or our own accounting. */
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
