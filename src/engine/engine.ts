/**
 * A simulated vLLM engine (v1 scheduler semantics), pure: no I/O, no timers, no clock. The front that owns
 * the clock drives it:
 *
 *   engine.add(req, now)                    // any time
 *   const d = engine.startStep(now)         // plan a batch; null when idle
 *   ... at now + d:  engine.finishStep(now + d) -> events
 *
 * Scheduling per step (as vLLM v1's Scheduler.schedule with chunked prefill):
 * 1. running requests in order: each gets the tokens it still needs (1 when decoding; a chunk of its
 *    prompt when prefilling), within the step's token budget `maxNumBatchedTokens`. When the KV pool has
 *    no block for them, the *last* running request is preempted (its blocks freed, progress reset, put
 *    back at the head of the waiting queue; it is recomputed later, mostly from the prefix cache).
 * 2. if nothing was preempted: waiting requests FCFS while seats (`maxNumSeqs`) and budget remain. A
 *    request's cached prefix (full blocks, by chain hash) is reused and only the rest is computed; the
 *    queue stops at the first request whose blocks don't fit (head-of-line, like vLLM). A request whose
 *    LoRA adapter can't get a slot (all `maxLoras` slots used by running requests) is skipped for this
 *    step; loading a non-resident adapter costs `loraLoadMs` in the step, evicting the least recently
 *    used idle adapter.
 *
 * Events: `scheduled` and `preempted` are stamped with the step's start time and returned by the next
 * `finishStep`. When a sequence's last needed token is computed it samples one output token: the first one
 * yields a `first_token` event AND a `token` event with index 0; each later one a `token` event; after
 * `maxTokens` tokens (or at maxModelLen) a `finished` event follows in the same step.
 */
import { BlockPool } from './blocks.js';
import { blockHashes, loraSalt } from './hash.js';
import { DEFAULT_PROFILE, stepCostMs, type EngineProfile } from './profile.js';

export interface EngineRequest {
  id: string;
  /** token ids; must not be mutated after being passed in (hash chains are memoized per array) */
  promptTokens: ArrayLike<number>;
  /** the engine generates exactly this many (capped by maxModelLen and KV capacity) unless aborted */
  maxTokens: number;
  /** adapter name, undefined for the base model */
  lora?: string;
}

export type EngineEvent =
  | { type: 'scheduled'; id: string; at: number }
  | { type: 'first_token'; id: string; at: number; cachedTokens: number; promptTokens: number }
  | { type: 'token'; id: string; at: number; index: number }
  | { type: 'finished'; id: string; at: number; outputTokens: number; reason: 'length' }
  | { type: 'preempted'; id: string; at: number };

export interface EngineSnapshot {
  waiting: number;
  running: number;
  /** used blocks / all blocks (cached-free blocks count as free, as in vLLM) */
  kvUsage: number;
  /** prefix cache lookups, in tokens (vLLM counts request.num_tokens per lookup) */
  prefixQueries: number;
  /** prefix cache hits, in tokens */
  prefixHits: number;
  loraRunning: string[];
  loraWaiting: string[];
  /** adapters loaded in GPU slots, least recently used first */
  loraResident: string[];
  maxLoras: number;
  blockSize: number;
  numGpuBlocks: number;
  freeBlocks: number;
  cachedBlocks: number;
  evictedBlocks: number;
  promptTokensTotal: number;
  generationTokensTotal: number;
  successTotal: number;
  preemptionsTotal: number;
  stepsTotal: number;
  busy: boolean;
}

const WAITING = 0;
const RUNNING = 1;
const DONE = 2;

interface Req {
  id: string;
  tokens: ArrayLike<number>;
  promptLen: number;
  hashes: Float64Array;
  lora: string | undefined;
  maxTokens: number;
  arrival: number;
  numComputed: number;
  outputCount: number;
  blocks: number[];
  hashedBlocks: number;
  state: number;
  firstTokenDone: boolean;
  cachedTokens: number;
  scheduledOnce: boolean;
  /** estimate of cached prompt tokens, refreshed at add (for estimateTtftMs) */
  estCached: number;
}

/** The id of the request predictTtftMs adds for a moment (never a client's: ids come from the front). */
const PREDICT_ID = '\u0000predict';

interface SavedState {
  reqs: Req[];
  /** 7 fields per request, then each one's block-list length */
  fields: number[];
  blocks: number[][];
  waiting: Req[];
  running: Req[];
  planned: Req[];
  plannedTokens: number[];
  pendingEvents: EngineEvent[];
  loraResident: string[];
  loraRunningCount: Array<[string, number]>;
  scalars: number[];
}

export class Engine {
  readonly profile: EngineProfile;
  private readonly pool: BlockPool;
  private readonly byId = new Map<string, Req>();
  private waiting: Req[] = [];
  private running: Req[] = [];
  private readonly salts = new Map<string | undefined, number>();
  /** resident adapters, insertion order = LRU order (oldest first) */
  private readonly loraResident = new Map<string, true>();
  private readonly loraRunningCount = new Map<string, number>();

  private planned: Req[] = [];
  private plannedTokens: number[] = [];
  private pendingEvents: EngineEvent[] = [];
  private inFlight = false;
  private stepEnd = 0;
  /** false while predictTtftMs runs the future: no events are made */
  private emit = true;

  private prefixQueries = 0;
  private prefixHits = 0;
  private promptTokensTotal = 0;
  private generationTokensTotal = 0;
  private successTotal = 0;
  private preemptionsTotal = 0;
  private stepsTotal = 0;
  private readonly capacityTokens: number;

  constructor(profile: Partial<EngineProfile> = {}) {
    const p: EngineProfile = { ...DEFAULT_PROFILE, ...stripUndefined(profile) };
    p.loras = [...(profile.loras ?? DEFAULT_PROFILE.loras)];
    for (const k of ['maxNumSeqs', 'maxNumBatchedTokens', 'numGpuBlocks', 'blockSize', 'maxModelLen'] as const) {
      if (!Number.isInteger(p[k]) || p[k] < 1) throw new RangeError(`engine profile: ${k} must be a positive integer`);
    }
    if (!(p.prefillTokensPerS > 0)) throw new RangeError('engine profile: prefillTokensPerS must be > 0');
    if (!Number.isInteger(p.maxLoras) || p.maxLoras < 0) throw new RangeError('engine profile: maxLoras must be an integer >= 0');
    this.profile = p;
    this.pool = new BlockPool(p.numGpuBlocks);
    this.capacityTokens = p.numGpuBlocks * p.blockSize;
  }

  private salt(lora: string | undefined): number {
    let s = this.salts.get(lora);
    if (s === undefined) {
      s = loraSalt(lora);
      this.salts.set(lora, s);
    }
    return s;
  }

  /** Tokens of this prompt the prefix cache would serve now (full blocks, at most length - 1). */
  cachedPrefixTokens(promptTokens: ArrayLike<number>, lora?: string): number {
    const len = promptTokens.length;
    if (len === 0) return 0;
    const bs = this.profile.blockSize;
    const hashes = blockHashes(promptTokens, bs, this.salt(lora));
    return this.pool.lookup(hashes, Math.floor((len - 1) / bs)) * bs;
  }

  add(req: EngineRequest, now: number): void {
    if (this.byId.has(req.id)) throw new Error(`engine: duplicate request id ${req.id}`);
    const len = req.promptTokens.length;
    const p = this.profile;
    if (len < 1) throw new RangeError('engine: empty prompt');
    const limit = Math.min(p.maxModelLen, this.capacityTokens);
    if (len >= limit) throw new RangeError(`engine: prompt of ${len} tokens does not fit (limit ${limit})`);
    if (req.lora !== undefined && p.maxLoras < 1) throw new RangeError('engine: LoRA requested but maxLoras is 0');
    const maxTokens = Math.max(1, Math.min(Math.floor(req.maxTokens), limit - len));
    const hashes = blockHashes(req.promptTokens, p.blockSize, this.salt(req.lora));
    const r: Req = {
      id: req.id,
      tokens: req.promptTokens,
      promptLen: len,
      hashes,
      lora: req.lora,
      maxTokens,
      arrival: now,
      numComputed: 0,
      outputCount: 0,
      blocks: [],
      hashedBlocks: 0,
      state: WAITING,
      firstTokenDone: false,
      cachedTokens: 0,
      scheduledOnce: false,
      estCached: this.pool.lookup(hashes, Math.floor((len - 1) / p.blockSize)) * p.blockSize,
    };
    this.byId.set(req.id, r);
    this.waiting.push(r);
  }

  abort(id: string, _now: number): void {
    const r = this.byId.get(id);
    if (!r) return;
    this.byId.delete(id);
    if (r.state === WAITING) {
      const i = this.waiting.indexOf(r);
      if (i >= 0) this.waiting.splice(i, 1);
    } else if (r.state === RUNNING) {
      const i = this.running.indexOf(r);
      if (i >= 0) this.running.splice(i, 1);
      this.pool.releaseAll(r.blocks);
      r.blocks = [];
      this.loraRelease(r.lora);
    }
    r.state = DONE;
  }

  /** True between startStep and finishStep. */
  get stepInFlight(): boolean {
    return this.inFlight;
  }

  /** Has work: waiting or running requests. */
  get busy(): boolean {
    return this.running.length > 0 || this.waiting.length > 0;
  }

  private loraAcquire(lora: string | undefined): void {
    if (lora === undefined) return;
    this.loraRunningCount.set(lora, (this.loraRunningCount.get(lora) ?? 0) + 1);
    this.loraResident.delete(lora);
    this.loraResident.set(lora, true);
  }

  private loraRelease(lora: string | undefined): void {
    if (lora === undefined) return;
    const c = (this.loraRunningCount.get(lora) ?? 1) - 1;
    if (c <= 0) this.loraRunningCount.delete(lora);
    else this.loraRunningCount.set(lora, c);
    if (this.loraResident.has(lora)) {
      this.loraResident.delete(lora);
      this.loraResident.set(lora, true);
    }
  }

  /** 0: resident, 1: loadable (free slot or idle adapter to evict), -1: no slot now. */
  private loraCheck(lora: string): number {
    if (this.loraResident.has(lora)) return 0;
    if (this.loraResident.size < this.profile.maxLoras) return 1;
    for (const name of this.loraResident.keys()) if (!this.loraRunningCount.has(name)) return 1;
    return -1;
  }

  private loraLoad(lora: string): void {
    if (this.loraResident.size >= this.profile.maxLoras) {
      for (const name of this.loraResident.keys()) {
        if (!this.loraRunningCount.has(name)) {
          this.loraResident.delete(name);
          break;
        }
      }
    }
    this.loraResident.set(lora, true);
  }

  private preempt(r: Req, now: number): void {
    this.pool.releaseAll(r.blocks);
    r.blocks = [];
    r.numComputed = 0;
    r.hashedBlocks = 0;
    r.state = WAITING;
    this.loraRelease(r.lora);
    this.waiting.unshift(r);
    this.preemptionsTotal++;
    if (this.emit) this.pendingEvents.push({ type: 'preempted', id: r.id, at: now });
  }

  startStep(now: number): number | null {
    if (this.inFlight) throw new Error('engine: startStep called while a step is in flight');
    const p = this.profile;
    const bs = p.blockSize;
    const pool = this.pool;
    let budget = p.maxNumBatchedTokens;
    const planned = this.planned;
    const plannedTokens = this.plannedTokens;
    planned.length = 0;
    plannedTokens.length = 0;
    let prefillTokens = 0;
    let decodeSeqs = 0;
    let decodeCtx = 0;
    let loraLoads = 0;
    let preempted = false;

    // 1. running requests
    const running = this.running;
    for (let i = 0; i < running.length && budget > 0; i++) {
      const r = running[i];
      const need = r.promptLen + r.outputCount - r.numComputed;
      const n = need < budget ? need : budget;
      const required = Math.ceil((r.numComputed + n) / bs) - r.blocks.length;
      let selfPreempted = false;
      while (required > pool.numFree) {
        const victim = running.pop()!;
        this.preempt(victim, now);
        preempted = true;
        if (victim === r) {
          selfPreempted = true;
          break;
        }
      }
      if (selfPreempted) break;
      for (let k = 0; k < required; k++) r.blocks.push(pool.allocate());
      planned.push(r);
      plannedTokens.push(n);
      budget -= n;
      if (n === 1 && r.numComputed >= r.promptLen) {
        decodeSeqs++;
        decodeCtx += r.numComputed;
      } else prefillTokens += n;
    }

    // 2. waiting requests
    if (!preempted) {
      const waiting = this.waiting;
      let w = 0;
      while (w < waiting.length && budget > 0 && running.length < p.maxNumSeqs) {
        const r = waiting[w];
        let load = false;
        if (r.lora !== undefined) {
          const c = this.loraCheck(r.lora);
          if (c < 0) {
            w++;
            continue;
          }
          load = c === 1;
        }
        const seqLen = r.promptLen + r.outputCount;
        const hit = pool.lookup(r.hashes, Math.floor((seqLen - 1) / bs));
        const cached = hit * bs;
        const n = Math.min(seqLen - cached, budget);
        const newBlocks = Math.ceil((cached + n) / bs) - hit;
        let hitFree = 0;
        for (let k = 0; k < hit; k++) if (pool.refCnt[pool.cache.get(r.hashes[k])] === 0) hitFree++;
        if (newBlocks > pool.numFree - hitFree) break;
        // commit
        const blocks: number[] = new Array(hit);
        for (let k = 0; k < hit; k++) {
          const b = pool.cache.get(r.hashes[k]);
          pool.touch(b);
          blocks[k] = b;
        }
        for (let k = 0; k < newBlocks; k++) blocks.push(pool.allocate());
        r.blocks = blocks;
        r.numComputed = cached;
        r.hashedBlocks = hit;
        if (!r.scheduledOnce) {
          r.scheduledOnce = true;
          r.cachedTokens = cached;
        }
        this.prefixQueries += seqLen;
        this.prefixHits += cached;
        if (load) {
          this.loraLoad(r.lora!);
          loraLoads++;
        }
        this.loraAcquire(r.lora);
        waiting.splice(w, 1);
        r.state = RUNNING;
        running.push(r);
        if (this.emit) this.pendingEvents.push({ type: 'scheduled', id: r.id, at: now });
        planned.push(r);
        plannedTokens.push(n);
        budget -= n;
        prefillTokens += n;
      }
    }

    if (planned.length === 0) return null;
    this.inFlight = true;
    this.stepsTotal++;
    const d = stepCostMs(p, prefillTokens, decodeSeqs, decodeCtx, loraLoads);
    this.stepEnd = now + d;
    return d;
  }

  finishStep(now: number): EngineEvent[] {
    const events = this.pendingEvents;
    this.pendingEvents = [];
    if (!this.inFlight) return events;
    this.inFlight = false;
    const bs = this.profile.blockSize;
    const maxModelLen = this.profile.maxModelLen;
    const pool = this.pool;
    const planned = this.planned;
    const plannedTokens = this.plannedTokens;
    const emit = this.emit;
    let finished = false;
    for (let i = 0; i < planned.length; i++) {
      const r = planned[i];
      if (r.state !== RUNNING) continue; // aborted mid-step
      r.numComputed += plannedTokens[i];
      const full = Math.min(r.hashes.length, Math.floor(r.numComputed / bs));
      for (let b = r.hashedBlocks; b < full; b++) pool.register(r.blocks[b], r.hashes[b]);
      if (full > r.hashedBlocks) r.hashedBlocks = full;
      if (r.numComputed === r.promptLen + r.outputCount) {
        const index = r.outputCount++;
        this.generationTokensTotal++;
        if (!r.firstTokenDone) {
          r.firstTokenDone = true;
          this.promptTokensTotal += r.promptLen;
          if (emit) events.push({ type: 'first_token', id: r.id, at: now, cachedTokens: r.cachedTokens, promptTokens: r.promptLen });
        }
        if (emit) events.push({ type: 'token', id: r.id, at: now, index });
        if (r.outputCount >= r.maxTokens || r.promptLen + r.outputCount >= maxModelLen) {
          r.state = DONE;
          pool.releaseAll(r.blocks);
          r.blocks = [];
          this.loraRelease(r.lora);
          this.byId.delete(r.id);
          this.successTotal++;
          finished = true;
          if (emit) events.push({ type: 'finished', id: r.id, at: now, outputTokens: r.outputCount, reason: 'length' });
        }
      }
    }
    planned.length = 0;
    plannedTokens.length = 0;
    if (finished) this.running = this.running.filter((r) => r.state === RUNNING);
    return events;
  }

  snapshot(): EngineSnapshot {
    const loraRunning: string[] = [...this.loraRunningCount.keys()];
    const lw = new Set<string>();
    for (const r of this.waiting) if (r.lora !== undefined) lw.add(r.lora);
    return {
      waiting: this.waiting.length,
      running: this.running.length,
      kvUsage: 1 - this.pool.numFree / this.pool.numBlocks,
      prefixQueries: this.prefixQueries,
      prefixHits: this.prefixHits,
      loraRunning,
      loraWaiting: [...lw],
      loraResident: [...this.loraResident.keys()],
      maxLoras: this.profile.maxLoras,
      blockSize: this.profile.blockSize,
      numGpuBlocks: this.profile.numGpuBlocks,
      freeBlocks: this.pool.numFree,
      cachedBlocks: this.pool.cache.size,
      evictedBlocks: this.pool.evictions,
      promptTokensTotal: this.promptTokensTotal,
      generationTokensTotal: this.generationTokensTotal,
      successTotal: this.successTotal,
      preemptionsTotal: this.preemptionsTotal,
      stepsTotal: this.stepsTotal,
      busy: this.busy,
    };
  }

  /**
   * The exact TTFT a request added now would get here if nothing else arrived afterwards: the engine's
   * whole state (step in flight, queue, running batch, KV blocks and prefix cache, LoRA slots) is run
   * forward step by step with the request added, until its first token; then everything is put back as it
   * was (the block pool records its changes and undoes them, the requests' progress is saved and
   * restored), so the call has no effect on the engine. Stops early and answers Infinity once the answer is
   * known to exceed `limitMs` (a caller comparing engines passes the best TTFT found so far), and answers
   * Infinity when this engine cannot take the request (it does not fit, no LoRA support).
   */
  predictTtftMs(promptTokens: ArrayLike<number>, lora: string | undefined, now: number, limitMs = Infinity): number {
    const saved = this.save();
    this.pool.begin();
    this.emit = false;
    try {
      try {
        this.add({ id: PREDICT_ID, promptTokens, maxTokens: 1, lora }, now);
      } catch {
        return Infinity;
      }
      const r = this.byId.get(PREDICT_ID)!;
      let t = now;
      if (this.inFlight) {
        t = this.stepEnd;
        if (t - now > limitMs) return Infinity;
        this.finishStep(t);
      }
      for (;;) {
        const d = this.startStep(t);
        if (d === null) return Infinity; // nothing can run: it would never start
        t += d;
        if (t - now > limitMs) return Infinity;
        this.finishStep(t);
        if (r.firstTokenDone) return t - now;
      }
    } finally {
      this.emit = true;
      this.pool.rollback();
      this.restore(saved);
    }
  }

  private save(): SavedState {
    const reqs = [...this.byId.values()];
    const fields: number[] = new Array(reqs.length * 7);
    const blocks: number[][] = new Array(reqs.length);
    for (let i = 0; i < reqs.length; i++) {
      const r = reqs[i];
      const o = i * 7;
      fields[o] = r.numComputed;
      fields[o + 1] = r.outputCount;
      fields[o + 2] = r.hashedBlocks;
      fields[o + 3] = r.state;
      fields[o + 4] = r.firstTokenDone ? 1 : 0;
      fields[o + 5] = r.cachedTokens;
      fields[o + 6] = r.scheduledOnce ? 1 : 0;
      blocks[i] = r.blocks;
      // a request's block list only grows by push or is replaced: its length is enough to restore it
      fields.push(r.blocks.length);
    }
    return {
      reqs,
      fields,
      blocks,
      waiting: this.waiting.slice(),
      running: this.running.slice(),
      planned: this.planned.slice(),
      plannedTokens: this.plannedTokens.slice(),
      pendingEvents: this.pendingEvents.slice(),
      loraResident: [...this.loraResident.keys()],
      loraRunningCount: [...this.loraRunningCount],
      scalars: [
        this.inFlight ? 1 : 0,
        this.stepEnd,
        this.prefixQueries,
        this.prefixHits,
        this.promptTokensTotal,
        this.generationTokensTotal,
        this.successTotal,
        this.preemptionsTotal,
        this.stepsTotal,
      ],
    };
  }

  private restore(s: SavedState): void {
    const n = s.reqs.length;
    this.byId.clear();
    for (let i = 0; i < n; i++) {
      const r = s.reqs[i];
      const o = i * 7;
      r.numComputed = s.fields[o];
      r.outputCount = s.fields[o + 1];
      r.hashedBlocks = s.fields[o + 2];
      r.state = s.fields[o + 3];
      r.firstTokenDone = s.fields[o + 4] === 1;
      r.cachedTokens = s.fields[o + 5];
      r.scheduledOnce = s.fields[o + 6] === 1;
      r.blocks = s.blocks[i];
      r.blocks.length = s.fields[n * 7 + i];
      this.byId.set(r.id, r);
    }
    this.waiting = s.waiting;
    this.running = s.running;
    this.planned = s.planned;
    this.plannedTokens = s.plannedTokens;
    this.pendingEvents = s.pendingEvents;
    this.loraResident.clear();
    for (const k of s.loraResident) this.loraResident.set(k, true);
    this.loraRunningCount.clear();
    for (const [k, v] of s.loraRunningCount) this.loraRunningCount.set(k, v);
    const x = s.scalars;
    this.inFlight = x[0] === 1;
    this.stepEnd = x[1];
    this.prefixQueries = x[2];
    this.prefixHits = x[3];
    this.promptTokensTotal = x[4];
    this.generationTokensTotal = x[5];
    this.successTotal = x[6];
    this.preemptionsTotal = x[7];
    this.stepsTotal = x[8];
  }

  /**
   * Best estimate of the TTFT of a request added now, from the whole state, in O(running + waiting):
   * remaining time of the step in flight, time to wait for a seat and for KV blocks (running requests
   * finishing, shortest remaining first), the LoRA load if the adapter isn't resident, then the prefill
   * of everything queued ahead plus this request's uncached tokens, in steps shared with the decode batch.
   */
  estimateTtftMs(promptTokens: ArrayLike<number>, lora: string | undefined, now: number): number {
    const p = this.profile;
    const bs = p.blockSize;
    const len = promptTokens.length;
    const cached = this.cachedPrefixTokens(promptTokens, lora);
    const own = Math.max(1, len - cached);
    let t = this.inFlight ? Math.max(0, this.stepEnd - now) : 0;

    let ahead = 0;
    let decoding = 0;
    let decodeCtx = 0;
    for (const r of this.running) {
      const need = r.promptLen + r.outputCount - r.numComputed;
      if (need > 1 || r.numComputed < r.promptLen) ahead += need;
      else {
        decoding++;
        decodeCtx += r.numComputed;
      }
    }
    let waitingBlocks = 0;
    for (const r of this.waiting) {
      const need = Math.max(1, r.promptLen + r.outputCount - r.estCached);
      ahead += need;
      waitingBlocks += Math.ceil(need / bs);
    }
    const decodeStep = stepCostMs(p, 0, decoding, decodeCtx, 0);

    // seats and blocks
    const seatsShort = this.waiting.length + 1 - (p.maxNumSeqs - this.running.length);
    const blocksShort = waitingBlocks + Math.ceil(own / bs) - this.pool.numFree;
    if ((seatsShort > 0 || blocksShort > 0) && this.running.length > 0) {
      const rem: number[] = [];
      const held: number[] = [];
      for (const r of this.running) {
        rem.push(r.maxTokens - r.outputCount + Math.ceil((r.promptLen - Math.min(r.numComputed, r.promptLen)) / p.maxNumBatchedTokens));
        held.push(r.blocks.length);
      }
      const order = rem.map((_, i) => i).sort((a, b) => rem[a] - rem[b]);
      let seats = 0;
      let blocks = 0;
      let steps = 0;
      for (const i of order) {
        seats++;
        blocks += held[i];
        steps = rem[i];
        if (seats >= seatsShort && blocks >= blocksShort) break;
      }
      t += steps * decodeStep;
    }
    if (lora !== undefined && !this.loraResident.has(lora)) t += p.loraLoadMs;

    const total = ahead + own;
    const perStep = Math.max(1, p.maxNumBatchedTokens - decoding);
    const steps = Math.ceil(total / perStep);
    t += steps * stepCostMs(p, 0, decoding, decodeCtx, 0) + (total * 1000) / p.prefillTokensPerS;
    return t;
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
