/**
 * One pool's picker: its endpoints' state, its prefix index, and the pick pipeline — filters (filters.ts)
 * → prefix match → candidate table (candidates.ts) → saturation (saturation.ts) → policy (policies/, the
 * scored one summing scorers/) → accounting (endpoint-state.ts). Pure: time and randomness come from the
 * caller.
 */
import { CandidateTable, isFresh, prefillAheadTokens, waitingEstimate } from './candidates.js';
import { dispatched, eject, ejectionCeiling, ended, EndpointState, ENDED, firstByte, PoolTicket, type TicketOwner } from './endpoint-state.js';
import { explainPick } from './explain.js';
import { AdapterCatalog, servingAdapter, usable, type Filtered } from './filters.js';
import { hashPrefixBlocksInto } from './hash.js';
import { DEFAULT_POOL_OPTIONS, type PoolOptions } from './options.js';
import { POLICY_BY_NAME, PolicyContext, type PolicyName } from './policies/index.js';
import { PrefixIndex } from './prefix-index.js';
import { isSaturated, prefillBacklogMs, queued, retryAfterS } from './saturation.js';
import { DEFAULT_TUNING, type Tuning } from './tuning.js';
import type { EndpointSignals, Outcome, PickInput, PickOptions, PickResult, Ticket } from './types.js';

export interface PoolRouterOptions {
  random?: () => number;
  tuning?: Partial<Tuning>;
  /**
   * Told of every pick learned into the prefix index (replicas share these: see learnRemote). `chain` is
   * a reused buffer, valid only during the call: copy what you keep.
   */
  onLearn?: (pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number, now: number) => void;
  /**
   * Told when an endpoint reaches its consecutive-error limit: `ejected`, or `held_back` by the pool's
   * max_ejection_percent (it stays in the picks). For metrics; must not throw.
   */
  onEjection?: (pool: string, endpoint: string, outcome: 'ejected' | 'held_back', now: number) => void;
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
  /** what the cost and scorers count as waiting (pessimistic: every request sent since the scrape) */
  waiting_estimate: number;
  /** what the saturation test counts as waiting: the scraped queue and the evidence since (saturation.ts) */
  queued: number;
  /** our recent time to first byte here (EWMA, ms; 0: none yet) */
  ttft_ms: number;
  /**
   * the prefill work ahead of a new request here, in ms at the observed prefill speed (0: none observed);
   * over saturation.max_prefill_backlog on every endpoint not otherwise saturated, the pool answers 429
   */
  prefill_backlog_ms: number;
  saturated: boolean;
  eligible: boolean;
  why_not?: string;
  ejected_for_ms?: number;
  /** ejections since the endpoint joined the pool, and those max_ejection_percent held back */
  ejections_total: number;
  ejections_held_back: number;
  index_blocks: number;
  index_capacity: number;
}

export class PoolRouter implements TicketOwner {
  cfg: PoolOptions;
  readonly tuning: Tuning;
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
  private learnTicket: PoolTicket | null = null;
  // reused per pick (pick is synchronous and never re-entered): no per-candidate garbage
  private matchBuf = new Int32Array(64);
  private idBuf = new Int32Array(64);
  private chainBuf = new Uint32Array(256);
  private listBuf: EndpointState[] = [];
  private readonly table: CandidateTable;
  private readonly policyCtx: PolicyContext;
  private readonly adapters = new AdapterCatalog();
  private readonly onLearn: PoolRouterOptions['onLearn'];
  private readonly onEjection: PoolRouterOptions['onEjection'];

  constructor(
    readonly name: string,
    cfg: PoolOptions,
    endpoints: readonly string[] = cfg.endpoints,
    opts: PoolRouterOptions = {},
  ) {
    this.cfg = cfg;
    this.tuning = { ...DEFAULT_TUNING, ...opts.tuning };
    this.table = new CandidateTable(this.tuning);
    this.policyCtx = new PolicyContext(opts.random ?? Math.random, cfg.scoring);
    this.idx = this.newIndex(cfg);
    this.onLearn = opts.onLearn;
    this.onEjection = opts.onEjection;
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
    const learned = this.learnTicket;
    this.learnTicket = null;
    this.idx.insert(chain, this.learnEp, this.learnNow, this.learnLen);
    if (this.onLearn && learned) this.onLearn(this.name, learned.endpoint, chain, this.learnLen, this.learnNow);
  }

  /**
   * What another router (a replica) learned: `endpoint` served a request whose prefix blocks are `chain`.
   * Inserted as if this router had picked it at `now`; an endpoint this pool does not list is ignored.
   */
  learnRemote(endpoint: string, chain: ArrayLike<number>, totalBlocks: number, now: number): void {
    this.learn();
    const st = this.byName.get(endpoint);
    if (st === undefined || totalBlocks <= 0) return;
    this.idx.insert(chain, st.id, now, Math.min(totalBlocks, chain.length));
  }

  /**
   * Requests the other replicas have in flight on `endpoint`, summed, as the caller last heard of them (the
   * simulator's `--share events+inflight`). The load scorer adds them to this router's own count; an
   * endpoint this pool does not list is ignored, and anything not a finite count above 0 reads as 0.
   */
  setRemoteInFlight(endpoint: string, n: number): void {
    const st = this.byName.get(endpoint);
    if (st !== undefined) st.remoteInFlight = Number.isFinite(n) && n > 0 ? n : 0;
  }

  private newIndex(cfg: PoolOptions): PrefixIndex {
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
    this.adapters.invalidate();
  }

  /** New or reloaded pool options (same name): weights, thresholds, prefix settings. */
  reconfigure(cfg: PoolOptions): void {
    this.learn();
    const capChanged = cfg.prefix.capacity_blocks_per_endpoint !== this.cfg.prefix.capacity_blocks_per_endpoint;
    const cut = cfg.prefix.block_chars !== this.cfg.prefix.block_chars;
    this.cfg = cfg;
    this.policyCtx.setWeights(cfg.scoring);
    if (cut) this.idx = this.newIndex(cfg); // old hashes mean nothing now (and the stride may change)
    if (capChanged || cut) for (const st of this.states) this.applyCapacity(st);
    for (const st of this.states) if (!((st.sig?.maxNumSeqs ?? 0) > 0)) st.capacity = cfg.max_num_seqs ?? Infinity;
    this.setEndpoints(cfg.endpoints.length || !cfg.discovery ? cfg.endpoints : this.endpoints());
  }

  /**
   * The longest context every endpoint of the pool that has said takes (the least of their last scraped
   * `max_model_len`: during a rolling change a request may reach either), or undefined when none has said.
   */
  maxModelLen(): number | undefined {
    let least: number | undefined;
    for (const st of this.states) {
      const n = st.sig?.maxModelLen;
      if (n !== undefined && (least === undefined || n < least)) least = n;
    }
    return least;
  }

  updateSignals(endpoint: string, s: EndpointSignals, now: number): void {
    const st = this.byName.get(endpoint);
    if (!st) return;
    const prev = st.sig;
    st.sig = s;
    st.sigAt = now;
    st.epoch++;
    st.sinceScrape = 0;
    st.liveSinceScrape = 0;
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
      this.adapters.invalidate();
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
    if (cap === DEFAULT_POOL_OPTIONS.prefix.capacity_blocks_per_endpoint && s?.numGpuBlocks && s.blockSize) {
      // left at the default: the server's KV capacity in characters cut into our blocks
      cap = Math.max(1, Math.ceil((s.numGpuBlocks * s.blockSize * this.tuning.charsPerToken) / p.block_chars));
    }
    this.idx.setCapacity(st.id, cap);
  }

  pick(input: PickInput, now: number, opts: PickOptions = {}): PickResult {
    this.learn(); // the previous pick's, if deferred: its chain may be in chainBuf, rewritten below
    const policy: PolicyName = opts.policy ?? this.cfg.policy;
    const filtered: Filtered | null = opts.explain === true ? [] : null;
    const cfg = this.cfg;

    let list = usable(this.states, input.exclude, now, this.listBuf, filtered);
    if (list.length === 0) return { kind: 'unavailable' };
    const table = this.table;
    table.adapter = this.adapters.isAdapter(input.model, this.states) ? input.model : null;
    if (table.adapter !== null) list = servingAdapter(list, table.adapter, filtered);

    // prefix match (every policy learns the index, so switching policy keeps it warm)
    let chain: ArrayLike<number>;
    let totalBlocks: number;
    if (input.prefixBlocks) {
      chain = input.prefixBlocks;
      totalBlocks = chain.length;
    } else {
      if (this.chainBuf.length < cfg.prefix.max_blocks) this.chainBuf = new Uint32Array(cfg.prefix.max_blocks);
      chain = this.chainBuf;
      totalBlocks = hashPrefixBlocksInto(input.promptText, cfg.prefix.block_chars, input.model, cfg.prefix.max_blocks, this.chainBuf);
    }
    const ids = this.idBuf;
    for (let i = 0; i < list.length; i++) ids[i] = list[i].id;
    this.idx.match(chain, ids, this.matchBuf, list.length, totalBlocks);
    const promptTokens = Math.max(0, input.promptTokens);
    const promptChars = input.promptChars ?? input.promptText.length;
    const cpt = !input.prefixBlocks && promptChars > 0 && promptTokens > 0 ? promptChars / promptTokens : this.tuning.charsPerToken;

    table.totalBlocks = totalBlocks;
    const allSaturated = table.build(list, this.matchBuf, cfg, promptTokens, cpt, now);
    const ctx = this.policyCtx;
    ctx.scored = false;
    // a preferred endpoint that is usable wins outright: only it can serve the request as asked
    const pin = input.prefer === undefined ? -1 : list.findIndex((e) => e.name === input.prefer && e.ejectedUntil <= now);
    // A prompt longer than every candidate's max_model_len (by the estimate) is not held back by saturation:
    // the server refuses it at once with its 400, which costs it no work, while a 429 would only send the
    // client into retries of a request no server will take. It goes to the endpoint with the least in flight.
    const overLong = allSaturated && pin < 0 ? overLengthCandidate(table, list.length, promptTokens) : -1;
    if (allSaturated && pin < 0 && overLong < 0) {
      const explain = filtered ? explainPick(policy, this.name, table, filtered, null) : undefined;
      return { kind: 'saturated', retryAfterS: retryAfterS(table, cfg.saturation), explain };
    }
    ctx.dryRun = opts.dryRun === true;
    const chosen = pin >= 0 ? pin : overLong >= 0 ? overLong : POLICY_BY_NAME[policy].choose(table, ctx);
    const st = table.st[chosen];
    const explain = filtered ? explainPick(policy, this.name, table, filtered, ctx) : undefined;
    if (explain) {
      explain.winner = st.name;
      if (pin >= 0) explain.pinned = true;
    }

    const ticket = new PoolTicket(st.name, this.name, st, table.uncachedAt(chosen), st.epoch, now, opts.dryRun ? null : this);
    if (table.adapter !== null) ticket.adapter = table.adapter;
    // how long its first byte should take here: the prefill ahead and its own, at the observed speed (0: unknown)
    ticket.expectMs = table.backlogMs[chosen] + prefillBacklogMs(st, ticket.tokens);
    if (opts.dryRun) {
      ticket.phase = ENDED;
      return pin >= 0 ? { kind: 'ok', endpoint: st.name, ticket, explain, pinned: true } : { kind: 'ok', endpoint: st.name, ticket, explain };
    }
    dispatched(ticket, now);
    if (totalBlocks > 0) {
      if (opts.deferLearn) {
        this.learnChain = chain;
        this.learnEp = st.id;
        this.learnLen = totalBlocks;
        this.learnNow = now;
        this.learnTicket = ticket;
      } else {
        this.idx.insert(chain, st.id, now, totalBlocks);
        if (this.onLearn) this.onLearn(this.name, st.name, chain, totalBlocks, now);
      }
    }
    return pin >= 0 ? { kind: 'ok', endpoint: st.name, ticket, explain, pinned: true } : { kind: 'ok', endpoint: st.name, ticket, explain };
  }

  onFirstByte(t: Ticket, now: number): void {
    firstByte(t, now);
  }

  onEnd(t: Ticket, now: number, outcome: Outcome): void {
    if (!ended(t, now, outcome, this.tuning)) return;
    const st = (t as PoolTicket).st;
    if (st.removed) return;
    // the ceiling: never more than max_ejection_percent of the pool out at once (at least one may be)
    const ceiling = ejectionCeiling(this.states.length, this.cfg.max_ejection_percent);
    if (ceiling === 0) return; // max_ejection_percent: 0, ejection off
    if (this.ejectedCount(now) < ceiling) {
      eject(st, now, this.tuning);
      this.onEjection?.(this.name, st.name, 'ejected', now);
    } else {
      st.ejectionsHeldBack++;
      this.onEjection?.(this.name, st.name, 'held_back', now);
    }
  }

  /** Endpoints ejected now. */
  ejectedCount(now: number): number {
    let n = 0;
    for (const st of this.states) if (st.ejectedUntil > now) n++;
    return n;
  }

  debug(now: number): {
    policy: PolicyName;
    index: ReturnType<PrefixIndex['stats']>;
    ejection: { ejected: number; max_ejected: number; max_ejection_percent: number };
    endpoints: DebugEndpoint[];
  } {
    this.learn();
    const { queue_depth: qd, kv_cache: kvT, max_prefill_backlog: maxBacklog } = this.cfg.saturation;
    return {
      policy: this.cfg.policy,
      index: this.idx.stats(),
      ejection: {
        ejected: this.ejectedCount(now),
        max_ejected: ejectionCeiling(this.states.length, this.cfg.max_ejection_percent),
        max_ejection_percent: this.cfg.max_ejection_percent,
      },
      endpoints: this.states.map((st) => {
        const fresh = isFresh(st, now, this.cfg.metrics.stale_after);
        const waiting = waitingEstimate(st, fresh);
        const q = queued(st, fresh, now, this.tuning, maxBacklog);
        const backlog = prefillBacklogMs(st, prefillAheadTokens(st, fresh, now, this.tuning));
        const saturated = isSaturated(q, fresh, fresh ? st.sig!.kvUsage : NaN, qd, kvT);
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
          queued: q,
          ttft_ms: Math.round(st.ttftMs),
          prefill_backlog_ms: Math.round(backlog),
          saturated,
          eligible: why === undefined,
          ejections_total: st.ejectionsTotal,
          ejections_held_back: st.ejectionsHeldBack,
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

/**
 * For a saturated pool: when the request's `promptTokens` is over the `max_model_len` of every candidate
 * (each has reported one), the row with the least in flight; else -1.
 */
function overLengthCandidate(table: CandidateTable, n: number, promptTokens: number): number {
  let longest = 0;
  for (let i = 0; i < n; i++) {
    const len = table.st[i].sig?.maxModelLen;
    if (len === undefined) return -1; // a server that has not said may take it
    if (len > longest) longest = len;
  }
  if (promptTokens <= longest) return -1;
  let best = 0;
  for (let i = 1; i < n; i++) if (table.st[i].inFlight < table.st[best].inFlight) best = i;
  return best;
}
