/**
 * The prefix-affinity index: which endpoint has (probably) cached which prompt prefix.
 *
 * A radix tree over chained block hashes. Because block i's hash already covers blocks 0..i
 * (see hash.ts), a node is identified by its hash alone: the tree is stored as a flat Map hash → node,
 * with parent pointers for walking up. Each node holds, per endpoint id, an entry with the last-use time;
 * each endpoint's entries form one LRU list (most recent first).
 *
 * Invariant (prefix closure): if endpoint e is on a node, e is on every ancestor. Inserting touches the
 * whole root path deepest-first, so a parent is always more recent than its children in e's LRU list, and
 * eviction (from the LRU tail) always removes leaves before their parents. This lets `match` find the
 * deepest node by binary search (≈ log2(max_blocks) Map lookups instead of one per block), and each
 * endpoint's own match depth by binary search over the same memoised nodes.
 *
 * Bounds: `capacityPerEndpoint` entries per endpoint (LRU) and `maxTotal` entries in all (the endpoint
 * with the most entries gives one up). 32-bit hash collisions (≈ n²/2³³ pairs for n nodes) can only cost a
 * wrong affinity guess, never a wrong answer.
 */

class Entry {
  prev: Entry | null = null;
  next: Entry | null = null;
  constructor(
    readonly node: PNode,
    readonly ep: number,
    public time: number,
  ) {}
}

class PNode {
  /** entries by endpoint id (a small holey array) */
  ents: Array<Entry | undefined> = [];
  n = 0;
  attached = true;
  constructor(
    readonly hash: number,
    readonly parent: PNode | null,
  ) {}
}

class EpList {
  head: Entry | null = null;
  tail: Entry | null = null;
  count = 0;
  constructor(public capacity: number) {}
}

/** bytes per (node, endpoint) entry and per node, measured roughly with --expose-gc on Node 20 */
const ENTRY_BYTES = 56;
const NODE_BYTES = 120;

export interface PrefixIndexOptions {
  capacityPerEndpoint: number;
  /** total entries over all endpoints; default capacityPerEndpoint × 64 capped at 4M */
  maxTotal?: number;
}

export class PrefixIndex {
  private readonly nodes = new Map<number, PNode>();
  private readonly lists: Array<EpList | undefined> = [];
  private total = 0;
  private defaultCapacity: number;
  maxTotal: number;
  // scratch for match(): memoised node lookups by depth
  private memo: Array<PNode | null | undefined> = [];

  constructor(opts: PrefixIndexOptions) {
    this.defaultCapacity = Math.max(1, opts.capacityPerEndpoint | 0);
    this.maxTotal = Math.max(1, opts.maxTotal ?? Math.min(4_000_000, this.defaultCapacity * 64));
  }

  /** Set one endpoint's capacity (e.g. from vllm:cache_config_info); evicts down to it at once. */
  setCapacity(ep: number, capacity: number): void {
    const l = this.list(ep);
    l.capacity = Math.max(1, capacity | 0);
    while (l.count > l.capacity) this.evictOne(ep);
  }

  capacity(ep: number): number {
    return this.lists[ep]?.capacity ?? this.defaultCapacity;
  }

  private list(ep: number): EpList {
    let l = this.lists[ep];
    if (!l) {
      l = new EpList(this.defaultCapacity);
      this.lists[ep] = l;
    }
    return l;
  }

  private get(depth: number, chain: ArrayLike<number>): PNode | null {
    let m = this.memo[depth];
    if (m === undefined) {
      m = this.nodes.get(chain[depth]) ?? null;
      this.memo[depth] = m;
    }
    return m;
  }

  /**
   * Match a chain: writes into `out[ep]` the number of leading blocks endpoint `ep` has (0 for the
   * others among `eps`), and returns the deepest match over all endpoints.
   */
  match(chain: ArrayLike<number>, eps: ArrayLike<number>, out: Int32Array): number {
    for (let i = 0; i < eps.length; i++) out[eps[i]] = 0;
    const n = chain.length;
    if (n === 0 || this.total === 0) return 0;
    const memo = this.memo;
    memo.length = 0;
    const first = this.get(0, chain);
    if (!first) return 0;
    // deepest existing node: largest d with node(d-1) present (existence is monotone by prefix closure)
    let lo = 1;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.get(mid - 1, chain)) lo = mid;
      else hi = mid - 1;
    }
    const deepest = lo;
    const deepNode = this.get(deepest - 1, chain)!;
    for (let i = 0; i < eps.length; i++) {
      const ep = eps[i];
      if (first.ents[ep] === undefined) continue;
      if (deepNode.ents[ep] !== undefined) {
        out[ep] = deepest;
        continue;
      }
      let a = 1;
      let b = deepest - 1;
      while (a < b) {
        const mid = (a + b + 1) >> 1;
        const nd = this.get(mid - 1, chain);
        if (nd && nd.ents[ep] !== undefined) a = mid;
        else b = mid - 1;
      }
      out[ep] = a;
    }
    return deepest;
  }

  /** Record that endpoint `ep` now holds the whole chain (learned from a routing decision). */
  insert(chain: ArrayLike<number>, ep: number, now: number): void {
    const n = chain.length;
    if (n === 0) return;
    const l = this.list(ep);
    // find (or create) the deepest node, creating missing nodes top-down
    let parent: PNode | null = null;
    let node: PNode | null = null;
    // skip quickly over the existing part: binary search like match()
    this.memo.length = 0;
    let lo = 0;
    let hi = n;
    if (this.get(0, chain)) {
      lo = 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (this.get(mid - 1, chain)) lo = mid;
        else hi = mid - 1;
      }
    }
    parent = lo > 0 ? this.get(lo - 1, chain) : null;
    for (let d = lo; d < n; d++) {
      const h = chain[d];
      let nd = this.nodes.get(h);
      if (!nd) {
        nd = new PNode(h, parent);
        this.nodes.set(h, nd);
      }
      parent = nd;
    }
    node = parent;
    // touch deepest-first so the root ends most recent
    let guard = n;
    while (node && guard-- > 0) {
      if (!node.attached) {
        node.attached = true;
        if (!this.nodes.has(node.hash)) this.nodes.set(node.hash, node);
      }
      let e = node.ents[ep];
      if (e) {
        e.time = now;
        this.unlink(l, e);
      } else {
        e = new Entry(node, ep, now);
        node.ents[ep] = e;
        node.n++;
        l.count++;
        this.total++;
      }
      this.pushHead(l, e);
      node = node.parent;
    }
    while (l.count > l.capacity) this.evictOne(ep);
    while (this.total > this.maxTotal) this.evictGlobal();
  }

  /** Drop every entry of an endpoint (removed by discovery or reload). */
  removeEndpoint(ep: number): void {
    const l = this.lists[ep];
    if (!l) return;
    while (l.tail) this.evictOne(ep);
    this.lists[ep] = undefined;
  }

  blocksOf(ep: number): number {
    return this.lists[ep]?.count ?? 0;
  }

  stats(): { blocks: number; nodes: number; approxBytes: number } {
    return {
      blocks: this.total,
      nodes: this.nodes.size,
      approxBytes: this.total * ENTRY_BYTES + this.nodes.size * NODE_BYTES,
    };
  }

  private evictOne(ep: number): void {
    const l = this.lists[ep];
    const e = l?.tail;
    if (!l || !e) return;
    this.unlink(l, e);
    l.count--;
    this.total--;
    const nd = e.node;
    nd.ents[ep] = undefined;
    nd.n--;
    if (nd.n === 0) {
      nd.ents = [];
      nd.attached = false;
      if (this.nodes.get(nd.hash) === nd) this.nodes.delete(nd.hash);
    }
  }

  private evictGlobal(): void {
    let best = -1;
    let bestCount = 0;
    for (let i = 0; i < this.lists.length; i++) {
      const l = this.lists[i];
      if (l && l.count > bestCount) {
        bestCount = l.count;
        best = i;
      }
    }
    if (best < 0) {
      this.total = 0;
      return;
    }
    this.evictOne(best);
  }

  private unlink(l: EpList, e: Entry): void {
    if (e.prev) e.prev.next = e.next;
    else if (l.head === e) l.head = e.next;
    if (e.next) e.next.prev = e.prev;
    else if (l.tail === e) l.tail = e.prev;
    e.prev = e.next = null;
  }

  private pushHead(l: EpList, e: Entry): void {
    e.next = l.head;
    e.prev = null;
    if (l.head) l.head.prev = e;
    l.head = e;
    if (!l.tail) l.tail = e;
  }
}
