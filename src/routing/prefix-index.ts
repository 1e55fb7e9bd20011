/**
 * The prefix-affinity index: which endpoint has (probably) cached which prompt prefix.
 *
 * A radix tree over chained block hashes. Because block i's hash already covers blocks 0..i
 * (see hash.ts), a node is identified by its hash alone: the tree is stored as a flat Map hash → node id,
 * with parent links for walking up. Each node has, per endpoint, an entry with its last-use time; each
 * endpoint's entries form one LRU list (most recent first).
 *
 * Storage is struct-of-arrays (typed arrays with free lists, grown by doubling): no object per node or
 * entry, so a 200k-block index costs the garbage collector nothing and walks stay cache-friendly.
 * Node membership is a bitset per node (one bit per endpoint id) for O(1) tests in match().
 *
 * Invariant (prefix closure): if endpoint e is on a node, e is on every ancestor. Inserting touches the
 * whole root path deepest-first, so a parent is always more recent than its children in e's LRU list, and
 * eviction (from the LRU tail) removes leaves before their parents. So `match` finds the deepest node by
 * binary search (≈ log2(max_blocks) Map lookups rather than one per block), and each endpoint's depth by
 * binary search over the same memoised nodes.
 *
 * Bounds: `capacityPerEndpoint` entries per endpoint (LRU) and `maxTotal` in all (the endpoint with the
 * most entries gives one up). 32-bit hash collisions (≈ n²/2³³ pairs for n nodes) can only cost a wrong
 * affinity guess, never a wrong answer.
 */

const NIL = -1;

export interface PrefixIndexOptions {
  capacityPerEndpoint: number;
  /** total entries over all endpoints; default capacityPerEndpoint × 64 capped at 4M */
  maxTotal?: number;
}

function grow<T extends Int32Array | Uint32Array | Float64Array>(a: T, n: number, fill?: number): T {
  const b = new (a.constructor as { new (n: number): T })(n);
  b.set(a);
  if (fill !== undefined) b.fill(fill, a.length);
  return b;
}

export class PrefixIndex {
  private readonly map = new Map<number, number>(); // hash → node id
  // nodes
  private nCap = 1024;
  private nHash = new Uint32Array(this.nCap);
  private nParent = new Int32Array(this.nCap);
  private nCount = new Int32Array(this.nCap); // entries on the node; -1 = free
  private nFirst = new Int32Array(this.nCap); // first entry of the node's entry chain
  private words = 2; // bitset words per node
  private nBits = new Uint32Array(this.nCap * this.words);
  private nFree: number[] = [];
  private nNext = 0;
  // entries
  private eCap = 4096;
  private eNode = new Int32Array(this.eCap);
  private eEp = new Int32Array(this.eCap);
  private ePrev = new Int32Array(this.eCap); // LRU list of the endpoint
  private eNext = new Int32Array(this.eCap);
  private eSib = new Int32Array(this.eCap); // next entry on the same node
  private eTime = new Float64Array(this.eCap);
  private eFree = NIL; // free list through eNext
  private eNextNew = 0;
  // endpoints
  private head: number[] = [];
  private tail: number[] = [];
  private count: number[] = [];
  private cap: number[] = [];
  private total = 0;
  private readonly defaultCapacity: number;
  maxTotal: number;
  // scratch for match(): memoised node lookups by depth (-2 = not looked up)
  private memo = new Int32Array(256);

  constructor(opts: PrefixIndexOptions) {
    this.defaultCapacity = Math.max(1, opts.capacityPerEndpoint | 0);
    this.maxTotal = Math.max(1, opts.maxTotal ?? Math.min(4_000_000, this.defaultCapacity * 64));
  }

  private ensureEp(ep: number): void {
    while (this.head.length <= ep) {
      this.head.push(NIL);
      this.tail.push(NIL);
      this.count.push(0);
      this.cap.push(this.defaultCapacity);
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
    this.cap[ep] = Math.max(1, capacity | 0);
    while (this.count[ep] > this.cap[ep]) this.evictOne(ep);
  }

  capacity(ep: number): number {
    return this.cap[ep] ?? this.defaultCapacity;
  }

  private has(node: number, ep: number): boolean {
    const w = ep >>> 5;
    return w < this.words && (this.nBits[node * this.words + w] & (1 << (ep & 31))) !== 0;
  }

  private lookup(depth: number, chain: ArrayLike<number>): number {
    let m = this.memo[depth];
    if (m === -2) {
      m = this.map.get(chain[depth]) ?? NIL;
      this.memo[depth] = m;
    }
    return m;
  }

  private resetMemo(n: number): void {
    if (this.memo.length < n) this.memo = new Int32Array(Math.max(n, this.memo.length * 2));
    this.memo.fill(-2, 0, n);
  }

  /** Deepest d (1..n) with a node at depth d-1, or 0; existence is monotone by prefix closure. */
  private deepest(chain: ArrayLike<number>): number {
    const n = chain.length;
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

  /**
   * Match a chain: writes into `out[ep]` the number of leading blocks endpoint `ep` has (0 for the
   * others among `eps`), and returns the deepest match over all endpoints.
   */
  match(chain: ArrayLike<number>, eps: ArrayLike<number>, out: Int32Array, count = eps.length): number {
    for (let i = 0; i < count; i++) out[eps[i]] = 0;
    const n = chain.length;
    if (n === 0 || this.total === 0) return 0;
    this.resetMemo(n);
    const deepest = this.deepest(chain);
    if (deepest === 0) return 0;
    const first = this.lookup(0, chain);
    const deepNode = this.lookup(deepest - 1, chain);
    for (let i = 0; i < count; i++) {
      const ep = eps[i];
      if (!this.has(first, ep)) continue;
      if (this.has(deepNode, ep)) {
        out[ep] = deepest;
        continue;
      }
      let a = 1;
      let b = deepest - 1;
      while (a < b) {
        const mid = (a + b + 1) >> 1;
        const nd = this.lookup(mid - 1, chain);
        if (nd !== NIL && this.has(nd, ep)) a = mid;
        else b = mid - 1;
      }
      out[ep] = a;
    }
    return deepest;
  }

  private newNode(hash: number, parent: number): number {
    let id: number;
    if (this.nFree.length > 0) id = this.nFree.pop()!;
    else {
      if (this.nNext === this.nCap) {
        const c = this.nCap * 2;
        this.nHash = grow(this.nHash, c);
        this.nParent = grow(this.nParent, c);
        this.nCount = grow(this.nCount, c);
        this.nFirst = grow(this.nFirst, c);
        this.nBits = grow(this.nBits, c * this.words);
        this.nCap = c;
      }
      id = this.nNext++;
    }
    this.nHash[id] = hash;
    this.nParent[id] = parent;
    this.nCount[id] = 0;
    this.nFirst[id] = NIL;
    this.nBits.fill(0, id * this.words, (id + 1) * this.words);
    this.map.set(hash, id);
    return id;
  }

  private newEntry(node: number, ep: number, now: number): number {
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
        this.eTime = grow(this.eTime, c);
        this.eCap = c;
      }
      e = this.eNextNew++;
    }
    this.eNode[e] = node;
    this.eEp[e] = ep;
    this.eTime[e] = now;
    this.ePrev[e] = NIL;
    this.eNext[e] = NIL;
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

  /** Record that endpoint `ep` now holds the whole chain (learned from a routing decision). */
  insert(chain: ArrayLike<number>, ep: number, now: number): void {
    const n = chain.length;
    if (n === 0) return;
    this.ensureEp(ep);
    this.resetMemo(n);
    const lo = this.deepest(chain);
    let parent = lo > 0 ? this.lookup(lo - 1, chain) : NIL;
    for (let d = lo; d < n; d++) {
      const h = chain[d];
      const found = this.map.get(h);
      parent = found !== undefined ? found : this.newNode(h, parent);
    }
    // touch deepest-first so the root ends most recent
    let node = parent;
    let guard = n;
    while (node !== NIL && guard-- > 0) {
      if (this.nCount[node] < 0) break; // freed under us (hash collision): stop, the rest is approximate
      let e = this.has(node, ep) ? this.entryOf(node, ep) : NIL;
      if (e !== NIL) {
        this.eTime[e] = now;
        if (this.head[ep] !== e) {
          this.unlink(ep, e);
          this.pushHead(ep, e);
        }
      } else {
        e = this.newEntry(node, ep, now);
        this.pushHead(ep, e);
      }
      node = this.nParent[node];
    }
    while (this.count[ep] > this.cap[ep]) this.evictOne(ep);
    while (this.total > this.maxTotal) this.evictGlobal();
  }

  /** Drop every entry of an endpoint (removed by discovery or reload). */
  removeEndpoint(ep: number): void {
    if (ep >= this.head.length) return;
    while (this.tail[ep] !== NIL) this.evictOne(ep);
    this.cap[ep] = this.defaultCapacity;
  }

  blocksOf(ep: number): number {
    return this.count[ep] ?? 0;
  }

  stats(): { blocks: number; nodes: number; approxBytes: number } {
    // typed arrays as allocated, plus the Map's ≈ 3 words per key
    const nodeBytes = this.nCap * (4 + 4 + 4 + 4 + 4 * this.words);
    const entryBytes = this.eCap * (4 * 5 + 8);
    return { blocks: this.total, nodes: this.map.size, approxBytes: nodeBytes + entryBytes + this.map.size * 24 };
  }

  private evictOne(ep: number): void {
    const e = this.tail[ep];
    if (e === NIL || e === undefined) return;
    this.unlink(ep, e);
    this.count[ep]--;
    this.total--;
    const node = this.eNode[e];
    // unlink from the node's entry chain
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
    this.eNext[e] = this.eFree;
    this.eFree = e;
    if (--this.nCount[node] === 0) {
      const h = this.nHash[node];
      if (this.map.get(h) === node) this.map.delete(h);
      this.nCount[node] = -1;
      this.nFree.push(node);
    }
  }

  private evictGlobal(): void {
    let best = -1;
    let bestCount = 0;
    for (let i = 0; i < this.count.length; i++) {
      if (this.count[i] > bestCount) {
        bestCount = this.count[i];
        best = i;
      }
    }
    if (best < 0) {
      this.total = 0;
      return;
    }
    this.evictOne(best);
  }

  private unlink(ep: number, e: number): void {
    const p = this.ePrev[e];
    const x = this.eNext[e];
    if (p !== NIL) this.eNext[p] = x;
    else if (this.head[ep] === e) this.head[ep] = x;
    if (x !== NIL) this.ePrev[x] = p;
    else if (this.tail[ep] === e) this.tail[ep] = p;
    this.ePrev[e] = this.eNext[e] = NIL;
  }

  private pushHead(ep: number, e: number): void {
    const h = this.head[ep];
    this.eNext[e] = h;
    this.ePrev[e] = NIL;
    if (h !== NIL) this.ePrev[h] = e;
    this.head[ep] = e;
    if (this.tail[ep] === NIL) this.tail[ep] = e;
  }
}
