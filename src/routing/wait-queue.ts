/**
 * The per-pool wait queue of flow control, as a pure data structure (no timers, no clock: the caller
 * passes time in and keeps its own deadlines), so the live gateway and the simulator order waiters the
 * same way.
 *
 * - Classes are served strictly in order: every `critical` waiter before any `standard` one, before any
 *   `sheddable` one.
 * - Inside a class, tenants take turns (round-robin over the tenants that have a waiter); each tenant's own
 *   waiters are first in, first out. A tenant that starts waiting joins at the end of the current round,
 *   so a tenant flooding the queue never delays another tenant by more than one of its own requests.
 * - The queue is bounded (`maxLength` waiters, all classes together). A waiter pushed into a full queue
 *   takes the place of the newest waiter of the least important class below its own, if there is one
 *   (returned as `evicted`, for the caller to refuse); otherwise it is refused (`full`).
 *
 * `remove` takes a waiter out from anywhere (its client left, its wait expired) in constant time, so a
 * long queue emptied by expiries costs no more than a short one.
 */

export const PRIORITY_CLASSES = ['critical', 'standard', 'sheddable'] as const;
export type PriorityClass = (typeof PRIORITY_CLASSES)[number];

/** A class's rank: 0 is served first. */
export function classRank(p: PriorityClass): number {
  return p === 'critical' ? 0 : p === 'standard' ? 1 : 2;
}

export interface Waiter<T> {
  readonly item: T;
  readonly priority: PriorityClass;
  readonly tenant: string;
  /** the time it was pushed (the caller's clock, ms) */
  readonly since: number;
  /** push order, for "newest" */
  readonly seq: number;
  /** false once it left the queue */
  queued: boolean;
}

/** A waiter with its links in its tenant's list (internal). */
interface Node<T> extends Waiter<T> {
  prev: Node<T> | undefined;
  next: Node<T> | undefined;
}

/** One tenant's waiters of one class, oldest first: a doubly linked list (push, shift and remove in O(1)). */
interface Fifo<T> {
  head: Node<T> | undefined;
  tail: Node<T> | undefined;
}

/** One class: each tenant's FIFO, and the tenants' turn order. */
class ClassQueue<T> {
  readonly byTenant = new Map<string, Fifo<T>>();
  /** tenants with a waiter, in turn order; `next` is the one served next */
  readonly turns: string[] = [];
  next = 0;
  size = 0;

  push(w: Node<T>): void {
    let fifo = this.byTenant.get(w.tenant);
    if (!fifo) {
      fifo = { head: undefined, tail: undefined };
      this.byTenant.set(w.tenant, fifo);
      // joins at the end of the current round: just before the tenant served next
      this.turns.splice(this.next, 0, w.tenant);
      this.next++;
      if (this.next >= this.turns.length) this.next = 0;
    }
    w.prev = fifo.tail;
    if (fifo.tail) fifo.tail.next = w;
    else fifo.head = w;
    fifo.tail = w;
    this.size++;
  }

  peek(): Node<T> | undefined {
    if (this.size === 0) return undefined;
    return this.byTenant.get(this.turns[this.next])!.head;
  }

  /** Takes the head out and passes the turn to the next tenant. */
  shift(): Node<T> | undefined {
    const w = this.peek();
    if (!w) return undefined;
    const emptied = this.unlink(w);
    if (emptied) this.dropTenant(this.next);
    else this.next = (this.next + 1) % this.turns.length;
    return w;
  }

  /** Takes `w` out (it must be in this class); its tenant keeps its turn. */
  remove(w: Node<T>): void {
    if (this.unlink(w)) this.dropTenant(this.turns.indexOf(w.tenant));
  }

  newest(): Node<T> | undefined {
    let best: Node<T> | undefined;
    for (const fifo of this.byTenant.values()) if (fifo.tail && (!best || fifo.tail.seq > best.seq)) best = fifo.tail;
    return best;
  }

  /** Unlinks `w` from its tenant's list; true when that list is now empty. */
  private unlink(w: Node<T>): boolean {
    const fifo = this.byTenant.get(w.tenant)!;
    if (w.prev) w.prev.next = w.next;
    else fifo.head = w.next;
    if (w.next) w.next.prev = w.prev;
    else fifo.tail = w.prev;
    w.prev = w.next = undefined;
    this.size--;
    return fifo.head === undefined;
  }

  private dropTenant(at: number): void {
    this.byTenant.delete(this.turns[at]);
    this.turns.splice(at, 1);
    if (at < this.next) this.next--;
    if (this.next >= this.turns.length) this.next = 0;
  }
}

export type PushResult<T> =
  | { readonly kind: 'queued'; readonly waiter: Waiter<T>; readonly evicted?: Waiter<T> }
  | { readonly kind: 'full' };

export class WaitQueue<T> {
  private readonly classes: ClassQueue<T>[] = PRIORITY_CLASSES.map(() => new ClassQueue<T>());
  private seq = 0;
  private total = 0;

  /** `maxLength` may change (a config reload); a queue longer than a new bound keeps its waiters. */
  constructor(public maxLength: number) {}

  get length(): number {
    return this.total;
  }

  lengthOf(p: PriorityClass): number {
    return this.classes[classRank(p)].size;
  }

  /** Whether a waiter of class `p` or a more important one is queued (a newcomer of class p must queue behind it). */
  hasWaiterAtOrAbove(p: PriorityClass): boolean {
    for (let r = 0; r <= classRank(p); r++) if (this.classes[r].size > 0) return true;
    return false;
  }

  push(item: T, priority: PriorityClass, tenant: string, now: number): PushResult<T> {
    let evicted: Waiter<T> | undefined;
    if (this.total >= this.maxLength) {
      const rank = classRank(priority);
      for (let r = this.classes.length - 1; r > rank && !evicted; r--) evicted = this.classes[r].newest();
      if (!evicted) return { kind: 'full' };
      this.remove(evicted);
    }
    const waiter: Node<T> = { item, priority, tenant, since: now, seq: this.seq++, queued: true, prev: undefined, next: undefined };
    this.classes[classRank(priority)].push(waiter);
    this.total++;
    return evicted ? { kind: 'queued', waiter, evicted } : { kind: 'queued', waiter };
  }

  /** The waiter served next: the most important class's current tenant's oldest. */
  peek(): Waiter<T> | undefined {
    for (const c of this.classes) {
      const w = c.peek();
      if (w) return w;
    }
    return undefined;
  }

  shift(): Waiter<T> | undefined {
    for (const c of this.classes) {
      const w = c.shift();
      if (w) {
        this.total--;
        w.queued = false;
        return w;
      }
    }
    return undefined;
  }

  /** Takes `w` out wherever it is (in O(1), whatever the queue's length); false when it was not queued. */
  remove(w: Waiter<T>): boolean {
    if (!w.queued) return false;
    this.classes[classRank(w.priority)].remove(w as Node<T>);
    this.total--;
    w.queued = false;
    return true;
  }

  /** Every waiter, served order not guaranteed (for shutdown). */
  drainAll(): Waiter<T>[] {
    const out: Waiter<T>[] = [];
    for (let w = this.shift(); w; w = this.shift()) out.push(w);
    return out;
  }
}
