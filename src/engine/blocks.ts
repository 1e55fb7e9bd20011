/**
 * The KV block pool with automatic prefix caching, modelled on vLLM v1's BlockPool/KVCacheManager:
 * - every block has a reference count; a block whose count drops to 0 goes to the tail of a free queue
 *   but keeps its hash, so a later request with the same prefix can reuse it ("cached free block");
 * - allocating takes the head of the free queue (least recently freed); if that block was cached its
 *   hash is dropped — an LRU eviction;
 * - a request frees its blocks in reverse order, so its tail blocks are evicted before its prefix.
 */
/**
 * hash -> block id, open addressing with linear probing and backward-shift deletion over typed arrays
 * (a JS Map with 53-bit double keys was the simulator's hot spot).
 */
export class BlockHashTable {
  private keys: Float64Array;
  private vals: Int32Array;
  private mask: number;
  size = 0;
  /** undo log while journaling (see BlockPool.begin/rollback): slot, old key, old value; first write only */
  private journaling = false;
  private jSlot = new Int32Array(256);
  private jKey = new Float64Array(256);
  private jVal = new Int32Array(256);
  private jLen = 0;
  private jSize = 0;
  private jGen = 0;
  private jSeen: Int32Array;
  /** the arrays as they were when a journaled insert made the table grow (put back whole on rollback) */
  private jGrown: { keys: Float64Array; vals: Int32Array; mask: number; seen: Int32Array } | null = null;
  constructor(expected: number) {
    let cap = 16;
    while (cap < expected * 2) cap *= 2;
    this.keys = new Float64Array(cap);
    this.vals = new Int32Array(cap).fill(-1);
    this.mask = cap - 1;
    this.jSeen = new Int32Array(cap);
  }
  /** Start recording every change so that rollback() can undo them. */
  begin(): void {
    this.journaling = true;
    this.jLen = 0;
    this.jGen++;
    this.jSize = this.size;
    this.jGrown = null;
  }
  /** Undo every change since begin() and stop recording. */
  rollback(): void {
    if (!this.journaling) return;
    if (this.jGrown) {
      // the grown arrays are dropped whole; the log holds what changed in the old ones before that
      this.keys = this.jGrown.keys;
      this.vals = this.jGrown.vals;
      this.mask = this.jGrown.mask;
      this.jSeen = this.jGrown.seen;
    }
    for (let k = 0; k < this.jLen; k++) {
      this.keys[this.jSlot[k]] = this.jKey[k];
      this.vals[this.jSlot[k]] = this.jVal[k];
    }
    this.size = this.jSize;
    this.journaling = false;
    this.jLen = 0;
    this.jGrown = null;
  }
  private write(i: number, key: number, val: number): void {
    if (this.journaling && this.jGrown === null && this.jSeen[i] !== this.jGen) {
      this.jSeen[i] = this.jGen;
      if (this.jLen === this.jSlot.length) {
        const n = this.jLen * 2;
        const sl = new Int32Array(n), k = new Float64Array(n), v = new Int32Array(n);
        sl.set(this.jSlot);
        k.set(this.jKey);
        v.set(this.jVal);
        this.jSlot = sl;
        this.jKey = k;
        this.jVal = v;
      }
      this.jSlot[this.jLen] = i;
      this.jKey[this.jLen] = this.keys[i];
      this.jVal[this.jLen++] = this.vals[i];
    }
    this.keys[i] = key;
    this.vals[i] = val;
  }
  private slot(key: number): number {
    return ((key % 2097152) ^ Math.imul(Math.floor(key / 2097152) | 0, 0x9e3779b1)) & this.mask;
  }
  get(key: number): number {
    const keys = this.keys, vals = this.vals, mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      const v = vals[i];
      if (v < 0) return -1;
      if (keys[i] === key) return v;
    }
  }
  has(key: number): boolean {
    return this.get(key) >= 0;
  }
  /** Insert if absent; returns false when present. */
  setIfAbsent(key: number, val: number): boolean {
    if (this.size * 2 >= this.keys.length) this.grow();
    const keys = this.keys, vals = this.vals, mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      if (vals[i] < 0) {
        this.write(i, key, val);
        this.size++;
        return true;
      }
      if (keys[i] === key) return false;
    }
  }
  delete(key: number): void {
    const keys = this.keys, vals = this.vals, mask = this.mask;
    let i = this.slot(key);
    for (; ; i = (i + 1) & mask) {
      if (vals[i] < 0) return;
      if (keys[i] === key) break;
    }
    // backward-shift deletion
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (vals[j] < 0) break;
      const home = this.slot(keys[j]);
      // move j to i if home is not cyclically in (i, j]
      if (i <= j ? home <= i || home > j : home <= i && home > j) {
        this.write(i, keys[j], vals[j]);
        i = j;
      }
    }
    this.write(i, keys[i], -1);
    this.size--;
  }
  *values(): IterableIterator<number> {
    for (let i = 0; i < this.vals.length; i++) if (this.vals[i] >= 0) yield this.vals[i];
  }
  private grow(): void {
    const oldK = this.keys, oldV = this.vals;
    if (this.journaling && this.jGrown === null) this.jGrown = { keys: oldK, vals: oldV, mask: this.mask, seen: this.jSeen };
    this.keys = new Float64Array(oldK.length * 2);
    this.vals = new Int32Array(oldK.length * 2).fill(-1);
    this.mask = this.keys.length - 1;
    this.jSeen = new Int32Array(this.keys.length);
    this.size = 0;
    for (let i = 0; i < oldV.length; i++) if (oldV[i] >= 0) this.setIfAbsent(oldK[i], oldV[i]);
  }
}

export class BlockPool {
  readonly numBlocks: number;
  readonly refCnt: Int32Array;
  readonly hashOf: Float64Array; // NaN when the block holds no cached full block
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = -1;
  private tail = -1;
  /** Blocks with reference count 0 (free or cached-free). */
  numFree: number;
  /** hash -> block id of cached blocks (referenced or not). */
  readonly cache: BlockHashTable;
  evictions = 0;
  /**
   * Undo log while journaling (begin → rollback): which array (J_*), the index, the old value. Lets the
   * engine run a copy of its future on the real pool and then put everything back, in time proportional to
   * what changed rather than to the pool's size.
   */
  private journaling = false;
  /** entries: (array code << 28 | index), old value; only the first write of a cell per journal is kept */
  private jKey = new Int32Array(1024);
  private jOld = new Float64Array(1024);
  private jLen = 0;
  /** per array and cell: the journal generation that saved it already */
  private jGen = 0;
  private readonly jSeen: Int32Array[];
  private jScalars = [0, 0, 0, 0];

  constructor(numBlocks: number) {
    this.numBlocks = numBlocks;
    this.refCnt = new Int32Array(numBlocks);
    this.hashOf = new Float64Array(numBlocks).fill(NaN);
    this.prev = new Int32Array(numBlocks);
    this.next = new Int32Array(numBlocks);
    for (let i = 0; i < numBlocks; i++) {
      this.prev[i] = i - 1;
      this.next[i] = i + 1 < numBlocks ? i + 1 : -1;
    }
    this.head = numBlocks > 0 ? 0 : -1;
    this.tail = numBlocks - 1;
    this.numFree = numBlocks;
    this.cache = new BlockHashTable(numBlocks);
    this.jSeen = [0, 1, 2, 3].map(() => new Int32Array(numBlocks));
  }

  /** Start recording every change (nesting is not supported). */
  begin(): void {
    if (this.journaling) throw new Error('BlockPool: journal already open');
    this.journaling = true;
    this.jLen = 0;
    this.jGen++;
    this.jScalars = [this.head, this.tail, this.numFree, this.evictions];
    this.cache.begin();
  }

  /** Undo every change since begin() and stop recording. */
  rollback(): void {
    if (!this.journaling) return;
    const key = this.jKey, old = this.jOld;
    for (let k = 0; k < this.jLen; k++) {
      const a = key[k] >>> 28;
      const i = key[k] & 0xfffffff;
      if (a === J_REF) this.refCnt[i] = old[k];
      else if (a === J_HASH) this.hashOf[i] = old[k];
      else if (a === J_PREV) this.prev[i] = old[k];
      else this.next[i] = old[k];
    }
    [this.head, this.tail, this.numFree, this.evictions] = this.jScalars;
    this.journaling = false;
    this.jLen = 0;
    this.cache.rollback();
  }

  private log(a: number, i: number, old: number): void {
    const seen = this.jSeen[a];
    if (seen[i] === this.jGen) return;
    seen[i] = this.jGen;
    if (this.jLen === this.jKey.length) {
      const k = new Int32Array(this.jLen * 2);
      k.set(this.jKey);
      this.jKey = k;
      const o = new Float64Array(this.jLen * 2);
      o.set(this.jOld);
      this.jOld = o;
    }
    this.jKey[this.jLen] = (a << 28) | i;
    this.jOld[this.jLen++] = old;
  }
  private setRef(b: number, v: number): void {
    if (this.journaling) this.log(J_REF, b, this.refCnt[b]);
    this.refCnt[b] = v;
  }
  private setHash(b: number, h: number): void {
    if (this.journaling) this.log(J_HASH, b, this.hashOf[b]);
    this.hashOf[b] = h;
  }
  private setPrev(b: number, v: number): void {
    if (this.journaling) this.log(J_PREV, b, this.prev[b]);
    this.prev[b] = v;
  }
  private setNext(b: number, v: number): void {
    if (this.journaling) this.log(J_NEXT, b, this.next[b]);
    this.next[b] = v;
  }

  private unlink(b: number): void {
    const p = this.prev[b], n = this.next[b];
    if (p >= 0) this.setNext(p, n); else this.head = n;
    if (n >= 0) this.setPrev(n, p); else this.tail = p;
    this.setPrev(b, -1);
    this.setNext(b, -1);
  }

  private append(b: number): void {
    this.setPrev(b, this.tail);
    this.setNext(b, -1);
    if (this.tail >= 0) this.setNext(this.tail, b); else this.head = b;
    this.tail = b;
  }

  /** Take a fresh block (evicting its cached content if any). Caller checks numFree first. */
  allocate(): number {
    const b = this.head;
    if (b < 0) throw new Error('BlockPool: out of blocks');
    this.unlink(b);
    const h = this.hashOf[b];
    if (h === h) {
      // NaN check: h === h is false for NaN
      if (this.cache.get(h) === b) this.cache.delete(h);
      this.setHash(b, NaN);
      this.evictions++;
    }
    this.setRef(b, 1);
    this.numFree--;
    return b;
  }

  /** Add a reference to a cached block (a prefix hit). */
  touch(b: number): void {
    if (this.refCnt[b] === 0) {
      this.unlink(b);
      this.numFree--;
    }
    this.setRef(b, this.refCnt[b] + 1);
  }

  /** Drop a reference; at zero the block joins the free queue's tail (kept cached if hashed). */
  release(b: number): void {
    const c = this.refCnt[b] - 1;
    this.setRef(b, c);
    if (c === 0) {
      this.append(b);
      this.numFree++;
    }
  }

  /** Release a request's blocks, tail first (vLLM order: the prefix is evicted last). */
  releaseAll(blocks: number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) this.release(blocks[i]);
  }

  /** Record that a block now holds the full block with hash `h` (first writer wins). */
  register(b: number, h: number): void {
    if (this.cache.setIfAbsent(h, b)) this.setHash(b, h);
  }

  /** Number of leading hashes present in the cache, up to `maxBlocks`. */
  lookup(hashes: Float64Array, maxBlocks: number): number {
    const n = Math.min(hashes.length, maxBlocks);
    let i = 0;
    while (i < n && this.cache.has(hashes[i])) i++;
    return i;
  }

  /** Number of cached-but-unreferenced blocks. */
  cachedFree(): number {
    let c = 0;
    for (const b of this.cache.values()) if (this.refCnt[b] === 0) c++;
    return c;
  }
}

const J_REF = 0;
const J_HASH = 1;
const J_PREV = 2;
const J_NEXT = 3;
