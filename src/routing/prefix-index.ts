/**
 * The prefix-affinity index: which endpoint has (probably) cached which prompt prefix.
 *
 * A radix tree over chained block hashes. Because block i's hash already covers blocks 0..i
 * (see hash.ts), a node is identified by its hash alone: nodes live in an open-addressing hash table
 * (hash → node id, linear probing, backward-shift deletion). Each node has, per endpoint holding it, an
 * entry; an entry knows its parent entry (the same endpoint's entry one block up) and how many child
 * entries hang below it.
 *
 * Storage is struct-of-arrays (typed arrays with free lists threaded through them, grown by doubling up to
 * the configured bound): no object, closure, boxed number or Map entry per node or entry, so learning a
 * prompt allocates nothing once the arrays have grown, and the garbage collector never sees the index.
 * Node membership is a bitset per node (one bit per endpoint id) for O(1) tests in match().
 *
 * Invariant (prefix closure): if endpoint e is on a node, e is on every ancestor. Entries are created
 * top-down and an entry with children is never evicted, so `match` finds the deepest node by binary search
 * (≈ log2(max_blocks) table lookups rather than one per block), and each endpoint's depth by binary search
 * over the same memoised nodes.
 *
 * Recency (lazy LRU, as a prefix cache evicts): each endpoint keeps one LRU list. Learning a chain only
 * creates the entries the endpoint lacks and moves the chain's deepest entry to the head; the ancestors are
 * not touched, because an entry with children cannot be evicted anyway — its recency is that of its most
 * recent descendant. Eviction takes the list's tail: a leaf is freed (and its parent, once childless,
 * goes to the tail: a dead chain is dropped deepest-first); an entry that still has children is just taken
 * off the list ("dormant") until its last child goes. Each entry is listed and unlisted at most once per
 * touch, so insert is O(new blocks + 1) and eviction amortised O(1).
 *
 * Bounds: `capacityPerEndpoint` entries per endpoint (LRU) and `maxTotal` in all (the endpoints with the
 * most entries give some up). Memory is ≈ 60 bytes per entry at most (arrays grow by doubling up to the
 * bound). 32-bit hash collisions (≈ n²/2³³ pairs for n nodes) can only cost a wrong affinity guess, never
 * a wrong answer.
 */

const NIL = -1;

export interface PrefixIndexOptions {
  /** blocks per endpoint (LRU bound) */
  capacityPerEndpoint: number;
  /** blocks over all endpoints; default capacityPerEndpoint × 64 capped at 4M */
  maxTotal?: number;
  /**
   * Index every `stride`-th block only (default 1). Block i's hash covers blocks 0..i, so the entry at
   * depth k·stride−1 stands for the whole k·stride-block prefix; a chain's last partial level is keyed by its
   * last block (a leaf that only the same prefix of exactly that length matches). Matches are known to
   * `stride` blocks, and learning a prompt costs 1/stride of the table work and memory. Every figure the
   * index reports is in blocks.
   */
  stride?: number;
}

function grow<T extends Int32Array | Uint32Array | Uint8Array>(a: T, n: number): T {
  const b = new (a.constructor as { new (n: number): T })(n);
  b.set(a);
  return b;
}

/** slot of a key in a table of 2^bits slots (the keys are already mixed; multiply anyway) */
const slotOf = (key: number, shift: number): number => Math.imul(key, 0x9e3779b1) >>> shift;

export class PrefixIndex {
  // hash table: slot → node id (NIL = empty); key = nHash[node]
  private tBits = 12;
  private tShift = 32 - 12;
  private table = new Int32Array(1 << 12).fill(NIL);
  private tKeys = new Uint32Array(1 << 12); // the slot's node's hash, beside it: probes stay in one array
  private nodes = 0; // live nodes
  // nodes
  private nCap = 1024;
  private nHash = new Uint32Array(this.nCap);
  private nCount = new Int32Array(this.nCap); // entries on the node; -1 = free
  private nFirst = new Int32Array(this.nCap); // first entry of the node's entry chain; free list link when free
  private words = 2; // bitset words per node
  private nBits = new Uint32Array(this.nCap * this.words);
  private nFree = NIL;
  private nNext = 0;
  // entries
  private eCap = 4096;
  private eNode = new Int32Array(this.eCap);
  private eEp = new Int32Array(this.eCap);
  private ePrev = new Int32Array(this.eCap); // LRU list of the endpoint
  private eNext = new Int32Array(this.eCap); // (also the free list's link)
  private eSib = new Int32Array(this.eCap); // next entry on the same node
  private eUp = new Int32Array(this.eCap); // the same endpoint's entry on the parent node
  private eKids = new Int32Array(this.eCap); // entries whose eUp is this one
  private eListed = new Uint8Array(this.eCap); // 1: on the endpoint's LRU list
  private eFree = NIL;
  private eNextNew = 0;
  // endpoints
  private head: number[] = [];
  private tail: number[] = [];
  private count: number[] = [];
  private cap: number[] = []; // in entries
  private capBlocks: number[] = []; // as set, in blocks
  private total = 0;
  private readonly defaultCapacity: number;
  private readonly defaultCapacityBlocks: number;
  /** in entries (blocks / stride) */
  private maxTotal: number;
  readonly stride: number;
  // scratch for match()/insert(): memoised node lookups by depth (-2 = not looked up), valid for memoChain
  // while no node was added or freed (version)
  private memo = new Int32Array(256);
  private memoChain: ArrayLike<number> | null = null;
  private memoLen = 0;
  /** blocks of the chain in the current call (a caller may pass a longer reused buffer) */
  private len = 0;
  private memoVersion = -1;
  private version = 0;

  constructor(opts: PrefixIndexOptions) {
    this.stride = Math.max(1, (opts.stride ?? 1) | 0);
    const cap = Math.max(1, opts.capacityPerEndpoint | 0);
    this.defaultCapacityBlocks = cap;
    this.defaultCapacity = Math.max(1, Math.floor(cap / this.stride));
    this.maxTotal = Math.max(1, Math.floor((opts.maxTotal ?? Math.min(4_000_000, cap * 64)) / this.stride));
  }

  private ensureEp(ep: number): void {
    while (this.head.length <= ep) {
      this.head.push(NIL);
      this.tail.push(NIL);
      this.count.push(0);
      this.cap.push(this.defaultCapacity);
      this.capBlocks.push(this.defaultCapacityBlocks);
    }
    if (ep >= this.words * 32) {
      const w = Math.ceil((ep + 1) / 32);
      const bits = new Uint32Array(this.nCap * w);
      for (let n = 0; n < this.nNext; n++) for (let i = 0; i < this.words; i++) bits[n * w + i] = this.nBits[n * this.words + i];
      this.nBits = bits;
      this.words = w;
    }
  }

  /** Set one endpoint's capacity (e.g. from vllm:cache_config_info); evicts down to it at once. */
  setCapacity(ep: number, capacity: number): void {
    this.ensureEp(ep);
    this.capBlocks[ep] = Math.max(1, capacity | 0);
    this.cap[ep] = Math.max(1, Math.floor((capacity | 0) / this.stride));
    while (this.count[ep] > this.cap[ep] && this.evictOne(ep));
  }

  capacity(ep: number): number {
    return this.capBlocks[ep] ?? this.defaultCapacityBlocks;
  }

  private has(node: number, ep: number): boolean {
    const w = ep >>> 5;
    return w < this.words && (this.nBits[node * this.words + w] & (1 << (ep & 31))) !== 0;
  }

  // ---- hash table

  private find(key: number): number {
    const t = this.table;
    const mask = t.length - 1;
    const k = this.tKeys;
    for (let s = slotOf(key, this.tShift); ; s = (s + 1) & mask) {
      const n = t[s];
      if (n === NIL) return NIL;
      if (k[s] === key) return n;
    }
  }

  private tableAdd(node: number): void {
    if ((this.nodes + 1) * 2 > this.table.length) this.rehash(this.tBits + 1);
    const key = this.nHash[node];
    const t = this.table;
    const mask = t.length - 1;
    let s = slotOf(key, this.tShift);
    while (t[s] !== NIL) s = (s + 1) & mask;
    t[s] = node;
    this.tKeys[s] = key;
    this.nodes++;
  }

  private tableRemove(node: number): void {
    const t = this.table;
    const k = this.tKeys;
    const mask = t.length - 1;
    let s = slotOf(this.nHash[node], this.tShift);
    while (t[s] !== node) {
      if (t[s] === NIL) return; // not there (cannot happen)
      s = (s + 1) & mask;
    }
    // backward-shift deletion: pull later members of the probe run into the hole
    let hole = s;
    for (let j = (s + 1) & mask; t[j] !== NIL; j = (j + 1) & mask) {
      const home = slotOf(k[j], this.tShift);
      // move t[j] into the hole unless its home lies cyclically in (hole, j]
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        t[hole] = t[j];
        k[hole] = k[j];
        hole = j;
      }
    }
    t[hole] = NIL;
    this.nodes--;
  }

  private rehash(bits: number): void {
    this.tBits = bits;
    this.tShift = 32 - bits;
    const t = new Int32Array(1 << bits).fill(NIL);
    const k = new Uint32Array(1 << bits);
    const mask = t.length - 1;
    for (let n = 0; n < this.nNext; n++) {
      if (this.nCount[n] < 0) continue;
      let s = slotOf(this.nHash[n], this.tShift);
      while (t[s] !== NIL) s = (s + 1) & mask;
      t[s] = n;
      k[s] = this.nHash[n];
    }
    this.table = t;
    this.tKeys = k;
  }

  // ---- match

  private lookup(depth: number, chain: ArrayLike<number>): number {
    let m = this.memo[depth];
    if (m === -2) {
      m = this.find(this.keyAt(chain, depth));
      this.memo[depth] = m;
    }
    return m;
  }

  /**
   * Make the memo valid for `chain`. `keep`: insert() right after match() on the same chain (as pool.pick
   * does) reuses match's lookups; match() itself always starts afresh (a caller may refill one array).
   */
  private useMemo(chain: ArrayLike<number>, keep: boolean): void {
    if (keep && this.memoChain === chain && this.memoLen === this.len && this.memoVersion === this.version) return;
    this.memoLen = this.len;
    const n = this.levels(chain);
    if (this.memo.length < n) this.memo = new Int32Array(Math.max(n, this.memo.length * 2));
    this.memo.fill(-2, 0, n);
    this.memoChain = chain;
    this.memoVersion = this.version;
  }

  private levels(chain: ArrayLike<number>): number {
    void chain;
    return this.stride === 1 ? this.len : Math.ceil(this.len / this.stride);
  }

  /** The hash standing for level d: block (d+1)·stride − 1, or the chain's last block for a partial level. */
  private keyAt(chain: ArrayLike<number>, d: number): number {
    return chain[Math.min((d + 1) * this.stride, this.len) - 1];
  }

  /** Deepest d (1..n) with a node at depth d-1, or 0; existence is monotone by prefix closure. */
  private deepest(chain: ArrayLike<number>): number {
    const n = this.levels(chain);
    if (this.lookup(0, chain) === NIL) return 0;
    let lo = 1;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lookup(mid - 1, chain) !== NIL) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Blocks of `chain` endpoint `ep` holds, given the deepest node depth over all endpoints. */
  private depthOf(chain: ArrayLike<number>, ep: number, deepest: number): number {
    if (deepest === 0 || !this.has(this.lookup(0, chain), ep)) return 0;
    if (this.has(this.lookup(deepest - 1, chain), ep)) return deepest;
    let a = 1;
    let b = deepest - 1;
    while (a < b) {
      const mid = (a + b + 1) >> 1;
      const nd = this.lookup(mid - 1, chain);
      if (nd !== NIL && this.has(nd, ep)) a = mid;
      else b = mid - 1;
    }
    return a;
  }

  /**
   * Match a chain (its first `len` blocks): writes into `out[ep]` the number of leading blocks endpoint `ep`
   * has (0 for the others among `eps`), and returns the deepest match over all endpoints.
   */
  match(chain: ArrayLike<number>, eps: ArrayLike<number>, out: Int32Array, count = eps.length, len = chain.length): number {
    this.len = Math.min(len, chain.length);
    for (let i = 0; i < count; i++) out[eps[i]] = 0;
    const n = this.levels(chain);
    if (n === 0 || this.total === 0) return 0;
    this.useMemo(chain, false);
    const deepest = this.deepest(chain);
    if (deepest === 0) return 0;
    const st = this.stride;
    for (let i = 0; i < count; i++) {
      const ep = eps[i];
      out[ep] = Math.min(this.depthOf(chain, ep, deepest) * st, this.len);
    }
    return Math.min(deepest * st, this.len);
  }

  // ---- insert

  private newNode(hash: number): number {
    let id: number;
    if (this.nFree !== NIL) {
      id = this.nFree;
      this.nFree = this.nFirst[id];
    } else {
      if (this.nNext === this.nCap) {
        const c = this.nCap * 2;
        this.nHash = grow(this.nHash, c);
        this.nCount = grow(this.nCount, c);
        this.nFirst = grow(this.nFirst, c);
        this.nBits = grow(this.nBits, c * this.words);
        this.nCap = c;
      }
      id = this.nNext++;
    }
    this.nHash[id] = hash;
    this.nCount[id] = 0;
    this.nFirst[id] = NIL;
    const w = this.words;
    for (let i = id * w, e = i + w; i < e; i++) this.nBits[i] = 0;
    this.tableAdd(id);
    this.version++; // memoised lookups may have missed this node
    return id;
  }

  private newEntry(node: number, ep: number, up: number): number {
    let e: number;
    if (this.eFree !== NIL) {
      e = this.eFree;
      this.eFree = this.eNext[e];
    } else {
      if (this.eNextNew === this.eCap) {
        const c = this.eCap * 2;
        this.eNode = grow(this.eNode, c);
        this.eEp = grow(this.eEp, c);
        this.ePrev = grow(this.ePrev, c);
        this.eNext = grow(this.eNext, c);
        this.eSib = grow(this.eSib, c);
        this.eUp = grow(this.eUp, c);
        this.eKids = grow(this.eKids, c);
        this.eListed = grow(this.eListed, c);
        this.eCap = c;
      }
      e = this.eNextNew++;
    }
    this.eNode[e] = node;
    this.eEp[e] = ep;
    this.ePrev[e] = NIL;
    this.eNext[e] = NIL;
    this.eUp[e] = up;
    this.eKids[e] = 0;
    this.eListed[e] = 0;
    if (up !== NIL) this.eKids[up]++;
    this.eSib[e] = this.nFirst[node];
    this.nFirst[node] = e;
    this.nCount[node]++;
    this.nBits[node * this.words + (ep >>> 5)] |= 1 << (ep & 31);
    this.count[ep]++;
    this.total++;
    return e;
  }

  private entryOf(node: number, ep: number): number {
    for (let e = this.nFirst[node]; e !== NIL; e = this.eSib[e]) if (this.eEp[e] === ep) return e;
    return NIL;
  }

  /**
   * Record that endpoint `ep` now holds the whole chain (learned from a routing decision). Creates only the
   * entries `ep` lacks and makes the chain's deepest entry the most recent; `now` is accepted for API
   * stability (recency is the list order).
   */
  insert(chain: ArrayLike<number>, ep: number, now?: number, len = chain.length): void {
    void now;
    this.len = Math.min(len, chain.length);
    const n = this.levels(chain);
    if (n === 0) return;
    this.ensureEp(ep);
    this.useMemo(chain, true);
    this.memoChain = null; // one reuse only
    const deepest = this.deepest(chain);
    const held = this.depthOf(chain, ep, deepest);
    let up = held > 0 ? this.entryOf(this.lookup(held - 1, chain), ep) : NIL;
    if (held < n) {
      for (let d = held; d < n; d++) {
        let node = d < deepest ? this.memo[d] : NIL;
        const key = this.keyAt(chain, d);
        if (node < 0) node = this.find(key);
        if (node === NIL) node = this.newNode(key);
        else if (this.has(node, ep)) {
          // a 32-bit collision (or a broken chain): follow it rather than duplicate the entry; the entry made
          // just before stays a leaf, so it must be listed
          if (up !== NIL && this.eKids[up] === 0 && this.eListed[up] === 0) this.pushHead(ep, up);
          up = this.entryOf(node, ep);
          continue;
        }
        up = this.newEntry(node, ep, up);
      }
    }
    if (up !== NIL) this.touch(ep, up);
    if (this.count[ep] > this.cap[ep] || this.total > this.maxTotal) {
      while (this.count[ep] > this.cap[ep] && this.evictOne(ep));
      if (this.total > this.maxTotal) this.evictGlobal();
    }
  }

  /** Drop every entry of an endpoint (removed by discovery or reload). */
  removeEndpoint(ep: number): void {
    if (ep >= this.head.length) return;
    while (this.count[ep] > 0 && this.evictOne(ep));
    this.cap[ep] = this.defaultCapacity;
    this.capBlocks[ep] = this.defaultCapacityBlocks;
  }

  blocksOf(ep: number): number {
    return (this.count[ep] ?? 0) * this.stride;
  }

  stats(): { blocks: number; nodes: number; approxBytes: number } {
    // the typed arrays as allocated (they grow by doubling, up to the bounds)
    const nodeBytes = this.nCap * (4 + 4 + 4 + 4 * this.words);
    const entryBytes = this.eCap * (4 * 7 + 1);
    return { blocks: this.total * this.stride, nodes: this.nodes, approxBytes: nodeBytes + entryBytes + this.table.length * 8 };
  }

  /** For tests: every structural invariant, or a description of the first one broken. O(size). */
  checkInvariants(): string | null {
    const kids = new Map<number, number>();
    const live = new Set<number>();
    for (let e = 0; e < this.eNextNew; e++) live.add(e);
    for (let e = this.eFree; e !== NIL; e = this.eNext[e]) live.delete(e);
    const perEp = new Array<number>(this.count.length).fill(0);
    const perNode = new Map<number, number>();
    for (const e of live) {
      const ep = this.eEp[e];
      const node = this.eNode[e];
      perEp[ep]++;
      perNode.set(node, (perNode.get(node) ?? 0) + 1);
      if (this.nCount[node] <= 0) return `entry ${e} on free node ${node}`;
      if (!this.has(node, ep)) return `entry ${e}: node ${node} lacks bit ${ep}`;
      const up = this.eUp[e];
      if (up !== NIL) {
        if (!live.has(up)) return `entry ${e}: parent ${up} freed`;
        if (this.eEp[up] !== ep) return `entry ${e}: parent of another endpoint`;
        kids.set(up, (kids.get(up) ?? 0) + 1);
      }
    }
    for (const e of live) {
      if ((kids.get(e) ?? 0) !== this.eKids[e]) return `entry ${e}: ${this.eKids[e]} kids recorded, ${kids.get(e) ?? 0} found`;
      if (this.eKids[e] === 0 && this.eListed[e] !== 1) return `leaf entry ${e} not listed`;
    }
    let total = 0;
    for (let ep = 0; ep < this.count.length; ep++) {
      if (perEp[ep] !== this.count[ep]) return `endpoint ${ep}: count ${this.count[ep]}, ${perEp[ep]} entries`;
      total += perEp[ep];
      let n = 0;
      let prev = NIL;
      for (let e = this.head[ep]; e !== NIL; e = this.eNext[e]) {
        if (this.ePrev[e] !== prev || this.eEp[e] !== ep || this.eListed[e] !== 1) return `endpoint ${ep}: list broken at ${e}`;
        prev = e;
        if (++n > perEp[ep]) return `endpoint ${ep}: list longer than its entries`;
      }
      if (this.tail[ep] !== prev) return `endpoint ${ep}: tail`;
    }
    if (total !== this.total) return `total ${this.total}, ${total} entries`;
    let nodes = 0;
    for (let n = 0; n < this.nNext; n++) {
      if (this.nCount[n] < 0) continue;
      nodes++;
      if ((perNode.get(n) ?? 0) !== this.nCount[n]) return `node ${n}: count ${this.nCount[n]}, ${perNode.get(n) ?? 0} entries`;
      let found = false;
      const t = this.table;
      for (let s = slotOf(this.nHash[n], this.tShift); t[s] !== NIL; s = (s + 1) & (t.length - 1)) if (t[s] === n) found = true;
      if (!found) return `node ${n} not reachable in the table`;
    }
    if (nodes !== this.nodes) return `nodes ${this.nodes}, ${nodes} live`;
    return null;
  }

  // ---- recency and eviction

  private touch(ep: number, e: number): void {
    if (this.eListed[e] === 1) {
      if (this.head[ep] === e) return;
      this.unlink(ep, e);
    }
    this.pushHead(ep, e);
  }

  /** Free one entry of `ep`: the least recent leaf (entries with children met on the way go dormant). */
  private evictOne(ep: number): boolean {
    for (;;) {
      const e = this.tail[ep];
      if (e === NIL || e === undefined) return false; // (cannot happen while count > 0: leaves are listed)
      this.unlink(ep, e);
      if (this.eKids[e] > 0) continue; // dormant until its last child goes
      this.freeEntry(ep, e);
      return true;
    }
  }

  private freeEntry(ep: number, e: number): void {
    this.count[ep]--;
    this.total--;
    const node = this.eNode[e];
    let p = NIL;
    for (let x = this.nFirst[node]; x !== NIL; x = this.eSib[x]) {
      if (x === e) {
        if (p === NIL) this.nFirst[node] = this.eSib[x];
        else this.eSib[p] = this.eSib[x];
        break;
      }
      p = x;
    }
    this.nBits[node * this.words + (ep >>> 5)] &= ~(1 << (ep & 31));
    const up = this.eUp[e];
    if (up !== NIL && --this.eKids[up] === 0 && this.eListed[up] === 0) this.pushTail(ep, up);
    this.eNext[e] = this.eFree;
    this.eFree = e;
    if (--this.nCount[node] === 0) {
      this.tableRemove(node);
      this.version++; // memoised lookups may hold this node
      this.nCount[node] = -1;
      this.nFirst[node] = this.nFree;
      this.nFree = node;
    }
  }

  /** Over the global bound: the endpoints with the most entries give some up. */
  private evictGlobal(): void {
    while (this.total > this.maxTotal) {
      let best = -1;
      let bestCount = 0;
      let second = 0;
      for (let i = 0; i < this.count.length; i++) {
        const c = this.count[i];
        if (c > bestCount) {
          second = bestCount;
          bestCount = c;
          best = i;
        } else if (c > second) second = c;
      }
      if (best < 0) return;
      let k = Math.max(1, Math.min(this.total - this.maxTotal, bestCount - second));
      while (k-- > 0 && this.count[best] > 0) if (!this.evictOne(best)) return;
    }
  }

  private unlink(ep: number, e: number): void {
    const p = this.ePrev[e];
    const x = this.eNext[e];
    if (p !== NIL) this.eNext[p] = x;
    else this.head[ep] = x;
    if (x !== NIL) this.ePrev[x] = p;
    else this.tail[ep] = p;
    this.ePrev[e] = this.eNext[e] = NIL;
    this.eListed[e] = 0;
  }

  private pushHead(ep: number, e: number): void {
    const h = this.head[ep];
    this.eNext[e] = h;
    this.ePrev[e] = NIL;
    if (h !== NIL) this.ePrev[h] = e;
    else this.tail[ep] = e;
    this.head[ep] = e;
    this.eListed[e] = 1;
  }

  private pushTail(ep: number, e: number): void {
    const t = this.tail[ep];
    this.ePrev[e] = t;
    this.eNext[e] = NIL;
    if (t !== NIL) this.eNext[t] = e;
    else this.head[ep] = e;
    this.tail[ep] = e;
    this.eListed[e] = 1;
  }
}
