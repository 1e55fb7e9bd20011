/**
 * Deadlines of one fixed length (a config limit such as request_timeout) shared by every request: one
 * Node timer per length for all of them, instead of a Timeout object (and a closure) per request.
 *
 * Every deadline of a queue is `now + length` when it is set, so they come in the order they expire: the
 * queue is a doubly linked list, appended at the tail, cancelled in place (O(1)), and its one timer is
 * armed for the head. A request that ends before its deadline (the usual case) only unlinks its entry;
 * the timer, when it fires at a cancelled head's time, re-arms for the new head. So a busy gateway sets
 * about one Node timer per `length` per queue, whatever its request rate, and an open stream holds one
 * small entry rather than a timer.
 */

/** Node's longest timer (a longer one fires at once, with a warning): a later deadline is re-armed then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Who is told when a deadline passes (once; never after cancel). */
export interface DeadlineOwner {
  deadlinePassed(d: Deadline): void;
}

export class Deadline {
  /** performance.now() at which it passes */
  at = 0;
  prev: Deadline | null = null;
  next: Deadline | null = null;
  /** the queue it is in; null once passed or cancelled */
  queue: DeadlineQueue | null = null;
  constructor(
    readonly owner: DeadlineOwner,
    /** what the owner needs to tell this deadline from its others (an attempt number, say) */
    readonly tag: number,
  ) {}

  /** Takes it out of its queue: it will not pass. Idempotent. */
  cancel(): void {
    this.queue?.remove(this);
  }
}

export class DeadlineQueue {
  private head: Deadline | null = null;
  private tail: Deadline | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** the onFire callback, made once */
  private readonly fire = (): void => this.onFire();

  constructor(
    /** the length of every deadline in this queue, in ms */
    readonly ms: number,
    /** told of an owner's exception (the owner should not throw); the queue goes on */
    private readonly onError: (err: unknown) => void,
  ) {}

  /** A deadline `ms` from now for `owner`. */
  add(owner: DeadlineOwner, tag = 0): Deadline {
    const d = new Deadline(owner, tag);
    d.at = performance.now() + this.ms;
    d.queue = this;
    d.prev = this.tail;
    if (this.tail) this.tail.next = d;
    else this.head = d;
    this.tail = d;
    if (this.timer === undefined) this.arm(d.at);
    return d;
  }

  remove(d: Deadline): void {
    if (d.queue !== this) return;
    if (d.prev) d.prev.next = d.next;
    else this.head = d.next;
    if (d.next) d.next.prev = d.prev;
    else this.tail = d.prev;
    d.prev = d.next = null;
    d.queue = null;
    if (this.head === null && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Deadlines in the queue (tests). */
  get size(): number {
    let n = 0;
    for (let d = this.head; d; d = d.next) n++;
    return n;
  }

  private arm(at: number): void {
    // (a Node timer may fire up to a millisecond before performance.now() reaches `at`: onFire re-arms)
    this.timer = setTimeout(this.fire, Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(at - performance.now()))));
    this.timer.unref();
  }

  private onFire(): void {
    this.timer = undefined;
    const now = performance.now();
    // each owner is told after its entry is unlinked, so an owner that cancels or adds others is safe
    for (let d = this.head; d !== null && d.at <= now; d = this.head) {
      this.remove(d);
      try {
        d.owner.deadlinePassed(d);
      } catch (err) {
        this.onError(err);
      }
    }
    if (this.head !== null && this.timer === undefined) this.arm(this.head.at);
  }
}

/** The queues of one gateway, one per deadline length. */
export class Deadlines {
  private readonly queues = new Map<number, DeadlineQueue>();
  constructor(private readonly onError: (err: unknown) => void) {}

  /** A deadline `ms` from now for `owner`. */
  add(ms: number, owner: DeadlineOwner, tag = 0): Deadline {
    let q = this.queues.get(ms);
    if (q === undefined) this.queues.set(ms, (q = new DeadlineQueue(ms, this.onError)));
    return q.add(owner, tag);
  }
}
