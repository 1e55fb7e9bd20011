/**
 * One pool's picker: endpoint state (last signals + the gateway's own accounting), the prefix index,
 * filters → saturation → policy (scored | round_robin | least_request | random). Pure: time and
 * randomness come from the caller.
 */
import type { PolicyName, PoolConfig } from '../config/schema.js';
import { hashPrefixBlocksInto } from './hash.js';
import { PrefixIndex } from './prefix-index.js';
import type {
  CandidateExplain,
  EndpointSignals,
  Outcome,
  PickExplain,
  PickInput,
  PickOptions,
  PickResult,
  Ticket,
} from './types.js';

/** Knobs of the scored policy that are not (yet) config keys; the simulator may tune them. */
export interface Tuning {
  /** TTFT cost of one running (decoding) sequence on an endpoint, in prompt-token equivalents */
  runCostTokens: number;
  /** added to both sides of the load factor so that tiny costs at idle do not swing decisions */
  idleCostTokens: number;
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
  foreignPromptTokens: 512,
  requestFloorTokens: 192,
  prefillTokensPerMs: 16,
  decodeMs: 2_000,
  loraLoadMs: 30,
  ejectAfterErrors: 3,
  ejectBaseMs: 5_000,
  ejectMaxMs: 60_000,
  charsPerToken: 4,
  indexStride: 0,
  indexGrainChars: 512,
};

export interface PoolRouterOptions {
  random?: () => number;
  tuning?: Partial<Tuning>;
}

/** The schema's default capacity: when the config leaves it, cache_config_info may size it instead. */
const DEFAULT_CAPACITY_BLOCKS = 31250;

export class EndpointState {
  sig: EndpointSignals | null = null;
  sigAt = -Infinity;
  scrapeFailures = 0;
  lastFailAt = -Infinity;
  /** bumps on every updateSignals; tickets dispatched in the current epoch are not in the metrics yet */
  epoch = 0;
  inFlight = 0;
  /** dispatched, no first byte yet */
  pending = 0;
  /** uncached prompt tokens of the pending requests */
  pendingTokens = 0;
  decoding = 0;
  /** pending requests dispatched since the last scrape */
  sinceScrape = 0;
  /** our pending requests when the last scrape was taken (it could see them, waiting or running) */
  pendingAtScrape = 0;
  /** batch capacity (max_num_seqs) when the signals carry it; Infinity otherwise */
  capacity = Infinity;
  /** whole-decode time of our requests here (first byte → end, EWMA, ms); 0 = none ended yet */
  decodeMs = 0;
  /** our decoding LoRA-adapter tickets (their adapter and first-byte time: how long a slot stays taken) */
  adapterTickets: RTicket[] = [];
  consecutiveErrors = 0;
  ejections = 0;
  ejectedUntil = -Infinity;
  lastFirstByteAt = -Infinity;
  /** since when the endpoint has worked on its current head pending request (pending > 0) */
  busySince = 0;
  /** observed prefill speed: EWMA sums of uncached tokens and the time they took at the head (ms) */
  prefillTok = 0;
  prefillMs = 0;
  /** first bytes per second (EWMA): how fast this endpoint drains its queue */
  drainRate = 0;
  removed = false;
  constructor(
    readonly id: number,
    readonly name: string,
  ) {}
}

class RTicket implements Ticket {
  phase = 0; // 0 pending, 1 decoding, 2 ended
  firstByteAt = 0;
  /** the LoRA adapter requested, or null for a base-model request */
  adapter: string | null = null;
  constructor(
    readonly endpoint: string,
    readonly pool: string,
    readonly st: EndpointState,
    readonly tokens: number,
    readonly epoch: number,
    readonly at: number,
    readonly owner: PoolRouter | null,
  ) {}
}

interface Cand {
  st: EndpointState;
  fresh: boolean;
  waiting: number;
  running: number;
  kv: number; // NaN when unknown
  saturated: boolean;
  matched: number;
  uncached: number;
  /** prefill work queued ahead of this request, in prompt tokens */
  ahead: number;
  cost: number;
}

export interface DebugEndpoint {
  endpoint: string;
  signals: EndpointSignals | null;
  age_ms: number | null;
  stale: boolean;
  scrape_failures: number;
  in_flight: number;
  pending: number;
  pending_prefill_tokens: number;
  decoding: number;
  waiting_estimate: number;
  saturated: boolean;
  eligible: boolean;
  why_not?: string;
  ejected_for_ms?: number;
  index_blocks: number;
  index_capacity: number;
}

export class PoolRouter {
  cfg: PoolConfig;
  readonly tuning: Tuning;
  private readonly random: () => number;
  private states: EndpointState[] = [];
  private byName = new Map<string, EndpointState>();
  private freeIds: number[] = [];
  private nextId = 0;
  private idx: PrefixIndex;
  // a pick's learning into the index, when the caller deferred it (PickOptions.deferLearn) until learn()
  private learnChain: ArrayLike<number> | null = null;
  private learnEp = 0;
  private learnLen = 0;
  private learnNow = 0;
  private learnTicket: RTicket | null = null;
  private rr = 0;
  private matchBuf = new Int32Array(64);
  private idBuf = new Int32Array(64);
  private chainBuf = new Uint32Array(256);
  private adapterSet = new Set<string>();
  // reused per pick (pick is synchronous and never re-entered): no per-candidate garbage
  private candPool: Cand[] = [];
  private candView: Cand[] = [];
  private ties: Cand[] = [];
  private listBuf: EndpointState[] = [];
  /** minima over the unsaturated candidates of the current pick (written by pick, read by scored) */
  private agg = { anyFresh: false, minRun: 0, minLoad: 0, minCost: 0, minAhead: 0, kvSum: 0, kvN: 0 };
  private adaptersDirty = false;

  constructor(
    readonly name: string,
    cfg: PoolConfig,
    endpoints: readonly string[] = cfg.endpoints,
    opts: PoolRouterOptions = {},
  ) {
    this.cfg = cfg;
    this.random = opts.random ?? Math.random;
    this.tuning = { ...DEFAULT_TUNING, ...opts.tuning };
    this.idx = this.newIndex(cfg);
    this.setEndpoints(endpoints);
  }

  /** The prefix index (learning any deferred pick first, so that it reads as after that pick). */
  get index(): PrefixIndex {
    this.learn();
    return this.idx;
  }

  /**
   * Learn the last pick into the index if it was deferred (PickOptions.deferLearn); with `ticket`, only if
   * it is that pick's. Every entry point that reads the index does this first, so a deferred learning is
   * never lost or reordered: the caller only chooses to run it after the request has left.
   */
  learn(ticket?: Ticket): void {
    const chain = this.learnChain;
    if (chain === null || (ticket !== undefined && ticket !== this.learnTicket)) return;
    this.learnChain = null;
    this.learnTicket = null;
    this.idx.insert(chain, this.learnEp, this.learnNow, this.learnLen);
  }

  private newIndex(cfg: PoolConfig): PrefixIndex {
    const t = this.tuning;
    const stride = t.indexStride > 0 ? t.indexStride : Math.max(1, Math.floor(t.indexGrainChars / cfg.prefix.block_chars));
    return new PrefixIndex({ capacityPerEndpoint: cfg.prefix.capacity_blocks_per_endpoint, stride });
  }

  endpoints(): string[] {
    return this.states.map((s) => s.name);
  }

  state(endpoint: string): EndpointState | undefined {
    return this.byName.get(endpoint);
  }

  /** Replace the endpoint list; kept endpoints keep their state, removed ones leave the index. */
  setEndpoints(endpoints: readonly string[]): void {
    this.learn();
    const want = new Set(endpoints);
    for (const st of this.states) {
      if (!want.has(st.name)) {
        st.removed = true;
        this.byName.delete(st.name);
        this.idx.removeEndpoint(st.id);
        this.freeIds.push(st.id);
      }
    }
    const next: EndpointState[] = [];
    for (const name of want) {
      let st = this.byName.get(name);
      if (!st) {
        const id = this.freeIds.length ? this.freeIds.pop()! : this.nextId++;
        st = new EndpointState(id, name);
        st.capacity = this.cfg.max_num_seqs ?? Infinity;
        this.byName.set(name, st);
      }
      next.push(st);
    }
    this.states = next;
    if (this.nextId > this.matchBuf.length) {
      let n = this.matchBuf.length;
      while (n < this.nextId) n *= 2;
      this.matchBuf = new Int32Array(n);
    }
    if (this.states.length > this.idBuf.length) this.idBuf = new Int32Array(this.states.length * 2);
    this.adaptersDirty = true;
  }

  /** New or reloaded pool config (same name): weights, thresholds, prefix settings. */
  reconfigure(cfg: PoolConfig): void {
    this.learn();
    const capChanged = cfg.prefix.capacity_blocks_per_endpoint !== this.cfg.prefix.capacity_blocks_per_endpoint;
    const cut = cfg.prefix.block_chars !== this.cfg.prefix.block_chars;
    this.cfg = cfg;
    if (cut) this.idx = this.newIndex(cfg); // old hashes mean nothing now (and the stride may change)
    if (capChanged || cut) for (const st of this.states) this.applyCapacity(st);
    this.setEndpoints(cfg.endpoints.length || !cfg.discovery ? cfg.endpoints : this.endpoints());
  }

  updateSignals(endpoint: string, s: EndpointSignals, now: number): void {
    const st = this.byName.get(endpoint);
    if (!st) return;
    const prev = st.sig;
    st.sig = s;
    st.sigAt = now;
    st.epoch++;
    st.sinceScrape = 0;
    st.pendingAtScrape = st.pending;
    st.scrapeFailures = 0;
    // batch capacity, when the endpoint reports it (max_num_seqs). Not guessed from a queue next to a running
    // count: a queue also forms behind a long chunked prefill (a step of 8192 tokens lasts longer than a
    // scrape interval) or for KV, and a capacity learned from those sent Mooncake's load away from warm caches.
    st.capacity = s.maxNumSeqs !== undefined && s.maxNumSeqs > 0 ? s.maxNumSeqs : (this.cfg.max_num_seqs ?? Infinity);
    if (!prev || prev.numGpuBlocks !== s.numGpuBlocks || prev.blockSize !== s.blockSize) this.applyCapacity(st);
    if (
      !prev ||
      s.adapters !== prev.adapters ||
      s.loraRunning.length + s.loraWaiting.length > 0 ||
      prev.loraRunning.length + prev.loraWaiting.length > 0
    ) {
      this.adaptersDirty = true;
    }
  }

  signalsFailed(endpoint: string, now: number): void {
    const st = this.byName.get(endpoint);
    if (!st) return;
    st.scrapeFailures++;
    st.lastFailAt = now;
  }

  private applyCapacity(st: EndpointState): void {
    const p = this.cfg.prefix;
    let cap = p.capacity_blocks_per_endpoint;
    const s = st.sig;
    if (cap === DEFAULT_CAPACITY_BLOCKS && s?.numGpuBlocks && s.blockSize) {
      // the server's KV capacity in characters (≈ 4 chars per token) cut into our blocks
      cap = Math.max(1, Math.ceil((s.numGpuBlocks * s.blockSize * this.tuning.charsPerToken) / p.block_chars));
    }
    this.idx.setCapacity(st.id, cap);
  }

  private isAdapter(model: string): boolean {
    if (this.adaptersDirty) {
      this.adapterSet.clear();
      for (const st of this.states) {
        const s = st.sig;
        if (!s) continue;
        if (s.adapters) for (const a of s.adapters) this.adapterSet.add(a);
        for (const a of s.loraRunning) this.adapterSet.add(a);
        for (const a of s.loraWaiting) this.adapterSet.add(a);
      }
      this.adaptersDirty = false;
    }
    return this.adapterSet.has(model);
  }

  private fresh(st: EndpointState, now: number): boolean {
    return st.sig !== null && now - st.sigAt <= this.cfg.metrics.stale_after;
  }

  /**
   * Uncached prompt tokens of our pending requests still to prefill: their sum, less what the endpoint has
   * likely done on the head request since it got there (its observed prefill speed × the time).
   */
  private queuedTokens(st: EndpointState, now: number): number {
    if (st.pending === 0 || st.prefillMs <= 0) return st.pendingTokens;
    const done = (st.prefillTok / st.prefillMs) * Math.max(0, now - st.busySince);
    return Math.max(0, st.pendingTokens - done);
  }

  /**
   * Waiting requests in the last scrape that are not ours: our pending requests at scrape time may be among
   * the waiting ones; requests of ours that finished since must not turn into someone else's queue.
   */
  private foreignWaiting(st: EndpointState): number {
    return Math.max(0, st.sig!.waiting - st.pendingAtScrape);
  }

  /** Waiting requests on an endpoint: fresh metrics plus what we sent since, or our own accounting. */
  private waitingEstimate(st: EndpointState, fresh: boolean): number {
    // of our pending requests, about one is being prefilled and the rest wait
    if (!fresh) return Math.max(0, st.pending - 1);
    // fresh: the scrape saw our earlier requests (waiting, or already running: with chunked prefill several
    // prefill at once), so only those sent since are added. (Those that left the queue since are not taken
    // off here: that would change how every policy sheds load; the cost does it instead.)
    const w = st.sig!.waiting;
    return w + Math.max(0, st.sinceScrape - (w === 0 ? 1 : 0));
  }

  /** ms → prompt-token equivalents at the endpoint's observed prefill speed (or the assumed one). */
  private tokensPerMs(st: EndpointState): number {
    return st.prefillMs > 0 && st.prefillTok > 0 ? st.prefillTok / st.prefillMs : this.tuning.prefillTokensPerMs;
  }

  /**
   * How long an adapter request waits for a LoRA slot here (ms): 0 when the adapter is resident, the load
   * time when a slot is free, else until the sequences of the resident adapters finish — at least a whole
   * decode, and at least as long again as our oldest such sequence has already run (long ones run long).
   */
  private adapterWaitMs(st: EndpointState, adapter: string, now: number): number {
    const s = st.sig;
    const t = this.tuning;
    if (!s) return 0; // unknown: the lora scorer's neutral value covers it
    if (s.loraRunning.includes(adapter)) return 0;
    if (s.maxLoras <= 0 || s.loraRunning.length < s.maxLoras) return t.loraLoadMs;
    let wait = st.decodeMs > 0 ? st.decodeMs : t.decodeMs;
    for (const tk of st.adapterTickets) {
      if (tk.adapter !== adapter && now - tk.firstByteAt > wait) wait = now - tk.firstByteAt;
    }
    return wait + t.loraLoadMs;
  }

  pick(input: PickInput, now: number, opts: PickOptions = {}): PickResult {
    this.learn(); // the previous pick's, if deferred: its chain may be in chainBuf, rewritten below
    const policy: PolicyName = opts.policy ?? this.cfg.policy;
    const wantExplain = opts.explain === true;
    const filtered: Array<{ endpoint: string; why: string }> | null = wantExplain ? [] : null;
    const cfg = this.cfg;

    // --- filters: excluded, ejected (unless all are), LoRA feasibility (unless none is feasible)
    let list: EndpointState[] = this.listBuf;
    list.length = 0;
    let ejected: EndpointState[] | null = null;
    for (const st of this.states) {
      if (input.exclude?.has(st.name)) {
        filtered?.push({ endpoint: st.name, why: 'excluded' });
        continue;
      }
      if (st.ejectedUntil > now) {
        (ejected ??= []).push(st);
        continue;
      }
      list.push(st);
    }
    if (list.length === 0 && ejected) list = ejected; // never fail closed on our own ejections
    else if (ejected && filtered) for (const st of ejected) filtered.push({ endpoint: st.name, why: 'ejected' });
    if (list.length === 0) return { kind: 'unavailable' };
    const adapter = this.adapterSet.size > 0 || this.adaptersDirty ? this.isAdapter(input.model) : false;
    if (adapter) {
      const ok = list.filter((st) => !st.sig?.adapters || st.sig.adapters.includes(input.model));
      if (ok.length > 0 && ok.length < list.length) {
        if (filtered) for (const st of list) if (!ok.includes(st)) filtered.push({ endpoint: st.name, why: 'adapter not served' });
        list = ok;
      }
    }

    // --- prefix match (every policy learns the index, so switching policy keeps it warm)
    const bc = cfg.prefix.block_chars;
    let chain: ArrayLike<number>;
    let totalBlocks: number;
    if (input.prefixBlocks) {
      chain = input.prefixBlocks;
      totalBlocks = chain.length;
    } else {
      if (this.chainBuf.length < cfg.prefix.max_blocks) this.chainBuf = new Uint32Array(cfg.prefix.max_blocks);
      chain = this.chainBuf;
      totalBlocks = hashPrefixBlocksInto(input.promptText, bc, input.model, cfg.prefix.max_blocks, this.chainBuf);
    }
    const ids = this.idBuf;
    for (let i = 0; i < list.length; i++) ids[i] = list[i].id;
    const match = this.matchBuf;
    this.idx.match(chain, ids, match, list.length, totalBlocks);
    const promptTokens = Math.max(0, input.promptTokens);
    const cpt =
      !input.prefixBlocks && input.promptText.length > 0 && promptTokens > 0
        ? input.promptText.length / promptTokens
        : this.tuning.charsPerToken;

    // --- candidates with derived load figures (and, over the unsaturated ones, the minima `scored` needs)
    const qd = cfg.saturation.queue_depth;
    const kvT = cfg.saturation.kv_cache;
    const t = this.tuning;
    const foreignTok = t.foreignPromptTokens;
    const floorTok = t.requestFloorTokens;
    const runTok = t.runCostTokens;
    const pool = this.candPool;
    while (pool.length < list.length) pool.push({ st: list[0], fresh: false, waiting: 0, running: 0, kv: 0, saturated: false, matched: 0, uncached: 0, ahead: 0, cost: 0 });
    const cands: Cand[] = this.candView;
    cands.length = list.length;
    let allSaturated = true;
    const agg = this.agg;
    agg.anyFresh = false;
    agg.minRun = Infinity;
    agg.minLoad = Infinity;
    agg.minCost = Infinity;
    agg.minAhead = Infinity;
    agg.kvSum = 0;
    agg.kvN = 0;
    for (let i = 0; i < list.length; i++) {
      const st = list[i];
      const sig = st.sig;
      const fresh = this.fresh(st, now);
      const waiting = this.waitingEstimate(st, fresh);
      const running = fresh ? Math.max(sig!.running, st.decoding) : st.decoding;
      const kv = fresh ? sig!.kvUsage : NaN;
      const saturated = (qd > 0 && waiting >= qd) || (kvT > 0 && fresh && kv >= kvT);
      const matched = match[st.id];
      const rest = promptTokens - (matched * bc) / cpt;
      const uncached = rest > 0 ? rest : 0;
      const foreign = fresh ? this.foreignWaiting(st) : 0;
      // requests queued ahead: each costs its prefill (ours: uncached tokens less observed progress; others:
      // an assumed prompt) plus a floor, the step that gives it its first token
      const ahead = this.queuedTokens(st, now) + foreign * foreignTok + (st.pending + foreign) * floorTok;
      let cost = ahead + uncached + floorTok + running * runTok;
      // decode slots: with the endpoint's batch full, this request waits for sequences to finish, one slot per
      // decode time / capacity on average
      const occupied = running + waiting + 1;
      let waitMs = 0;
      if (occupied > st.capacity) waitMs = ((occupied - st.capacity) * (st.decodeMs > 0 ? st.decodeMs : t.decodeMs)) / st.capacity;
      if (adapter) waitMs += this.adapterWaitMs(st, input.model, now);
      if (waitMs > 0) cost += waitMs * this.tokensPerMs(st);
      const c = pool[i];
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
      if (saturated) continue;
      allSaturated = false;
      if (fresh) {
        agg.anyFresh = true;
        agg.kvSum += 1 - kv;
        agg.kvN++;
      }
      if (running < agg.minRun) agg.minRun = running;
      if (st.inFlight < agg.minLoad) agg.minLoad = st.inFlight;
      if (cost < agg.minCost) agg.minCost = cost;
      if (ahead < agg.minAhead) agg.minAhead = ahead;
    }
    if (allSaturated) {
      const explain = wantExplain ? this.explainOf(policy, totalBlocks, cands, filtered!, null) : undefined;
      return { kind: 'saturated', retryAfterS: this.retryAfter(cands), explain };
    }

    let chosen: Cand;
    let explain: PickExplain | undefined;
    switch (policy) {
      case 'round_robin': {
        chosen = cands[this.rr % cands.length];
        if (!opts.dryRun) this.rr = (this.rr + 1) % 1_000_000_007;
        break;
      }
      case 'random': {
        chosen = cands[Math.min(cands.length - 1, Math.floor(this.random() * cands.length))];
        break;
      }
      case 'least_request': {
        let best: Cand[] = [];
        let bestF = Infinity;
        let bestM = Infinity;
        for (const c of cands) {
          const f = c.st.inFlight;
          const m = c.fresh ? c.st.sig!.waiting + c.st.sig!.running : 0;
          if (f < bestF || (f === bestF && m < bestM)) {
            best = [c];
            bestF = f;
            bestM = m;
          } else if (f === bestF && m === bestM) best.push(c);
        }
        chosen = best.length === 1 ? best[0] : best[Math.min(best.length - 1, Math.floor(this.random() * best.length))];
        break;
      }
      default: {
        const r = this.scored(cands, totalBlocks, adapter ? input.model : null, wantExplain);
        chosen = r.chosen;
        if (wantExplain) explain = this.explainOf(policy, totalBlocks, cands, filtered!, r.rows);
      }
    }
    if (wantExplain && !explain) explain = this.explainOf(policy, totalBlocks, cands, filtered!, null);
    if (explain) explain.winner = chosen.st.name;

    const st = chosen.st;
    const ticket = new RTicket(st.name, this.name, st, chosen.uncached, st.epoch, now, opts.dryRun ? null : this);
    if (adapter) ticket.adapter = input.model;
    if (!opts.dryRun) {
      ticket.phase = 0;
      st.inFlight++;
      if (st.pending++ === 0) st.busySince = now;
      st.pendingTokens += chosen.uncached;
      st.sinceScrape++;
      if (totalBlocks > 0) {
        if (opts.deferLearn) {
          this.learnChain = chain;
          this.learnEp = st.id;
          this.learnLen = totalBlocks;
          this.learnNow = now;
          this.learnTicket = ticket;
        } else {
          this.idx.insert(chain, st.id, now, totalBlocks);
        }
      }
    } else {
      ticket.phase = 2;
    }
    return { kind: 'ok', endpoint: st.name, ticket, explain };
  }

  /**
   * The scored policy. Each scorer gives [0,1]; `weighted` is their weighted mean. The final number is
   * weighted × loadFactor, loadFactor = (minCost + c0) / (cost + c0), where cost estimates the prefill
   * work ahead of this request on that endpoint, this request's own uncached tokens included. So prefix
   * affinity (worth at most the prefix weight's share of `weighted`) can only win while the matched
   * endpoint's estimated TTFT stays within 1/weighted-ratio of the cheapest one: load wins beyond that.
   */
  private scored(
    cands: Cand[],
    totalBlocks: number,
    adapter: string | null,
    wantRows: boolean,
  ): { chosen: Cand; rows: CandidateExplain[] | null } {
    const w = this.cfg.scoring;
    const { anyFresh, minRun, minLoad, minCost, minAhead, kvSum, kvN } = this.agg; // from pick()'s candidate pass
    const kvNeutral = kvN > 0 ? kvSum / kvN : 0.5;
    const wPrefix = totalBlocks > 0 ? w.prefix : 0;
    const wKv = anyFresh ? w.kv_cache : 0;
    const wLora = adapter !== null ? w.lora : 0;
    const wQueue = w.queue;
    const wRun = w.running;
    const wLoad = w.load;
    const wSum = wPrefix + wQueue + wRun + wKv + wLora + wLoad;
    const c0 = this.tuning.idleCostTokens;
    let best = -Infinity;
    const ties = this.ties;
    ties.length = 0;
    const rows: CandidateExplain[] | null = wantRows ? [] : null;
    for (const c of cands) {
      if (c.saturated) continue;
      const sPrefix = totalBlocks > 0 ? c.matched / totalBlocks : 0;
      const sQueue = (minAhead + c0) / (c.ahead + c0);
      const sRun = (minRun + 1) / (c.running + 1);
      const sKv = c.fresh ? Math.max(0, Math.min(1, 1 - c.kv)) : kvNeutral;
      const sLora = adapter !== null ? this.loraScore(c, adapter) : 0;
      const sLoad = (minLoad + 1) / (c.st.inFlight + 1);
      const weighted =
        wSum > 0
          ? (wPrefix * sPrefix + wQueue * sQueue + wRun * sRun + wKv * sKv + wLora * sLora + wLoad * sLoad) / wSum
          : 1;
      const loadFactor = (minCost + c0) / (c.cost + c0);
      const total = weighted * loadFactor;
      if (rows) {
        const scores: Record<string, number> = { queue: sQueue, running: sRun, load: sLoad };
        if (wPrefix > 0) scores.prefix = sPrefix;
        if (wKv > 0) scores.kv_cache = sKv;
        if (wLora > 0) scores.lora = sLora;
        rows.push({
          endpoint: c.st.name,
          scores,
          weighted,
          cost: c.cost,
          loadFactor,
          total,
          matchedBlocks: c.matched,
          stale: !c.fresh,
        });
      }
      if (total > best + 1e-12) {
        best = total;
        ties.length = 0;
        ties.push(c);
      } else if (total >= best - 1e-12) ties.push(c);
    }
    const chosen = ties.length === 1 ? ties[0] : ties[Math.min(ties.length - 1, Math.floor(this.random() * ties.length))];
    return { chosen, rows };
  }

  private loraScore(c: Cand, adapter: string): number {
    const s = c.st.sig;
    if (!s) return 0.5; // unknown
    if (s.loraRunning.includes(adapter)) return 1;
    if (s.maxLoras <= 0 || s.loraRunning.length < s.maxLoras) return 0.8;
    if (s.loraWaiting.includes(adapter)) return 0.6;
    return 0;
  }

  /** Seconds until the least-saturated endpoint has likely drained below the thresholds. */
  private retryAfter(cands: Cand[]): number {
    const ra = this.cfg.saturation.retry_after;
    if (ra !== 'auto') return Math.max(1, Math.ceil(ra / 1000));
    const qd = this.cfg.saturation.queue_depth;
    let best = Infinity;
    for (const c of cands) {
      const excess = qd > 0 ? Math.max(0, c.waiting - qd + 1) : 0;
      // no drain measurement yet: assume one request per second
      const rate = c.st.drainRate > 0 ? c.st.drainRate : 1;
      const t = excess > 0 ? excess / rate : 1; // kv-saturated only: a second, then look again
      if (t < best) best = t;
    }
    if (!Number.isFinite(best)) best = 1;
    return Math.max(1, Math.min(60, Math.ceil(best)));
  }

  private explainOf(
    policy: PolicyName,
    totalBlocks: number,
    cands: Cand[],
    filtered: Array<{ endpoint: string; why: string }>,
    rows: CandidateExplain[] | null,
  ): PickExplain {
    const out: PickExplain = { policy, pool: this.name, totalBlocks, candidates: [], filtered };
    if (rows) out.candidates = rows;
    else {
      for (const c of cands) {
        out.candidates.push({
          endpoint: c.st.name,
          scores: { prefix: totalBlocks > 0 ? c.matched / totalBlocks : 0 },
          weighted: 0,
          cost: c.cost,
          loadFactor: 0,
          total: 0,
          matchedBlocks: c.matched,
          stale: !c.fresh,
        });
      }
    }
    for (const c of cands) if (c.saturated) filtered.push({ endpoint: c.st.name, why: 'saturated' });
    return out;
  }

  onFirstByte(t: Ticket, now: number): void {
    const tk = t as RTicket;
    if (!(tk instanceof RTicket) || tk.phase !== 0) return;
    const st = tk.st;
    // prefill speed: this request was at the head since the later of its dispatch and the previous first byte
    const headMs = now - Math.max(st.busySince, tk.at);
    if (headMs > 0) {
      st.prefillTok = 0.9 * st.prefillTok + tk.tokens;
      st.prefillMs = 0.9 * st.prefillMs + headMs;
    }
    st.busySince = now;
    st.pending--;
    st.pendingTokens -= tk.tokens;
    if (st.pendingTokens < 1e-6) st.pendingTokens = Math.max(0, st.pendingTokens);
    if (tk.epoch === st.epoch && st.sinceScrape > 0) st.sinceScrape--;
    st.decoding++;
    tk.phase = 1;
    tk.firstByteAt = now;
    if (tk.adapter !== null) st.adapterTickets.push(tk);
    if (st.lastFirstByteAt > -Infinity) {
      const dt = Math.max(1, now - st.lastFirstByteAt);
      const inst = 1000 / dt;
      st.drainRate = st.drainRate > 0 ? 0.8 * st.drainRate + 0.2 * inst : inst;
    }
    st.lastFirstByteAt = now;
  }

  onEnd(t: Ticket, now: number, outcome: Outcome): void {
    const tk = t as RTicket;
    if (!(tk instanceof RTicket) || tk.phase === 2) return;
    const st = tk.st;
    if (tk.phase === 0) {
      st.pending--;
      st.pendingTokens = Math.max(0, st.pendingTokens - tk.tokens);
      if (tk.epoch === st.epoch && st.sinceScrape > 0) st.sinceScrape--;
    } else {
      st.decoding--;
      if (outcome === 'ok') {
        const d = Math.max(0, now - tk.firstByteAt);
        st.decodeMs = st.decodeMs > 0 ? 0.8 * st.decodeMs + 0.2 * d : d;
      }
      if (tk.adapter !== null) {
        const i = st.adapterTickets.indexOf(tk);
        if (i >= 0) {
          st.adapterTickets[i] = st.adapterTickets[st.adapterTickets.length - 1];
          st.adapterTickets.pop();
        }
      }
    }
    st.inFlight--;
    tk.phase = 2;
    if (outcome === 'error') {
      st.consecutiveErrors++;
      if (st.consecutiveErrors >= this.tuning.ejectAfterErrors) {
        const ms = Math.min(this.tuning.ejectMaxMs, this.tuning.ejectBaseMs * 2 ** st.ejections);
        st.ejections++;
        st.ejectedUntil = now + ms;
        st.consecutiveErrors = 0;
      }
    } else if (outcome === 'ok') {
      st.consecutiveErrors = 0;
      if (st.ejectedUntil <= now) st.ejections = 0;
    }
  }

  debug(now: number): { policy: PolicyName; index: ReturnType<PrefixIndex['stats']>; endpoints: DebugEndpoint[] } {
    this.learn();
    const qd = this.cfg.saturation.queue_depth;
    const kvT = this.cfg.saturation.kv_cache;
    return {
      policy: this.cfg.policy,
      index: this.idx.stats(),
      endpoints: this.states.map((st) => {
        const fresh = this.fresh(st, now);
        const waiting = this.waitingEstimate(st, fresh);
        const saturated = (qd > 0 && waiting >= qd) || (kvT > 0 && fresh && st.sig!.kvUsage >= kvT);
        const ejected = st.ejectedUntil > now;
        const why = ejected ? 'ejected after errors' : saturated ? 'saturated' : undefined;
        const d: DebugEndpoint = {
          endpoint: st.name,
          signals: st.sig,
          age_ms: st.sig ? now - st.sigAt : null,
          stale: !fresh,
          scrape_failures: st.scrapeFailures,
          in_flight: st.inFlight,
          pending: st.pending,
          pending_prefill_tokens: Math.round(st.pendingTokens),
          decoding: st.decoding,
          waiting_estimate: waiting,
          saturated,
          eligible: why === undefined,
          index_blocks: this.idx.blocksOf(st.id),
          index_capacity: this.idx.capacity(st.id),
        };
        if (why) d.why_not = why;
        if (ejected) d.ejected_for_ms = st.ejectedUntil - now;
        return d;
      }),
    };
  }
}
