/**
 * Flow control: what happens to a request when its pool is saturated, by priority class.
 *
 * - The class (`priorityOf`): the token's `priority_claim`, else the tenant's override
 *   (`tenants.overrides.<t>.priority`), else the request header `auth.priority_header` when its sender is
 *   trusted, else `tenants.default.priority`, else `standard`.
 * - On saturation (the picker answers "saturated" on the first try) a `sheddable` request is refused at
 *   once (429 + Retry-After); `standard` and `critical` ones wait in the pool's queue
 *   (`pools.<p>.queue`: at most `max_length`, each at most `max_wait`), ordered by the pure WaitQueue of
 *   src/routing (highest class first, tenants taking turns inside a class). With the queue off
 *   (`max_length: 0`, the default) every class gets the 429 at once, as before.
 * - A newcomer never overtakes: while a waiter of its class or a higher one is queued, it queues too (a
 *   sheddable one is refused).
 * - Capacity frees → the head is picked again (`wake`): when a request of the pool ends or gets its first
 *   byte (own accounting), and when a scrape brings new signals. The head is dispatched while the picker
 *   finds an endpoint; the first "saturated" stops the round.
 * - A waiter leaves early when its wait expires (429 + Retry-After, `rejected{reason="queue_timeout"}`),
 *   when a more important request takes its place in a full queue (429), when its client hangs up (at
 *   once: nothing was sent upstream) or at shutdown (503 shutting_down). Each leave is observed in
 *   `infergate_queue_wait_seconds{pool,priority,outcome}`.
 *
 * The timers (max_wait) live here, one per waiter; no exception from a member's callback escapes them.
 */
import type { Config } from '../config/schema.js';
import { errors, type ApiError } from '../openai/errors.js';
import { PRIORITY_CLASSES, WaitQueue, type PickResult, type PriorityClass, type Waiter } from '../routing/index.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Identity } from '../auth/claims.js';

/** What flow control sees of a request (the Exchange). */
export interface QueueMember {
  readonly requestId: string;
  readonly pool: string;
  readonly tenant: string;
  readonly priority: PriorityClass;
  /** A pick for this request now (the head of its queue). */
  pickFromQueue(): PickResult;
  /** It left the queue with this pick (ok: send it; unavailable: fail): never "saturated". */
  dequeued(pick: Exclude<PickResult, { kind: 'saturated' }>): void;
  /** It is refused while waiting (expired, displaced, shutdown). */
  refusedFromQueue(e: ApiError): void;
  /** A bug while handling it: the exchange answers 500. */
  onInternalError(err: unknown): void;
}

export type LeaveOutcome = 'dispatched' | 'expired' | 'evicted' | 'client_gone' | 'shutdown' | 'error';

interface Slot {
  readonly waiter: Waiter<QueueMember>;
  readonly queue: PoolQueue;
  readonly timer: NodeJS.Timeout;
}

class PoolQueue {
  readonly waiting: WaitQueue<QueueMember>;
  /** the last Retry-After the picker gave for this pool (seconds) */
  retryAfterS = 1;
  constructor(
    readonly pool: string,
    maxLength: number,
    /** for waiters queued from now on (a reload may change it) */
    public maxWaitMs: number,
  ) {
    this.waiting = new WaitQueue(maxLength);
  }
}

/** The request's class (see the file's comment for the order). `header`: the header's value, when trusted. */
export function priorityOf(identity: Identity | undefined, tenants: Config['tenants'], header: string | undefined): PriorityClass {
  if (identity?.priority) return identity.priority;
  const tenant = identity?.tenant || 'anonymous';
  const override = Object.hasOwn(tenants.overrides, tenant) ? tenants.overrides[tenant].priority : undefined;
  if (override) return override;
  if (header !== undefined) {
    const v = header.trim().toLowerCase();
    if ((PRIORITY_CLASSES as readonly string[]).includes(v)) return v as PriorityClass;
  }
  return tenants.default.priority ?? 'standard';
}

/** The priority header's value if the config trusts this request's sender with it. */
export function trustedPriorityHeader(
  cfg: Config['auth']['priority_header'],
  headers: Readonly<Record<string, string>>,
  fromTrustedProxy: () => boolean,
): string | undefined {
  if (cfg.trust === 'never') return undefined;
  const name = cfg.name.toLowerCase();
  if (!Object.hasOwn(headers, name)) return undefined;
  if (cfg.trust === 'trusted_proxies' && !fromTrustedProxy()) return undefined;
  return headers[name];
}

export class FlowControl {
  private readonly queues = new Map<string, PoolQueue>();
  private readonly slots = new Map<QueueMember, Slot>();
  /** pools to look at again (a wake that arrived during another) */
  private readonly toWake = new Set<string>();
  private waking = false;
  private closed = false;

  constructor(
    config: Config,
    private readonly metrics: GatewayMetrics,
    private readonly onError: (err: unknown) => void,
  ) {
    for (const [name, p] of Object.entries(config.pools)) {
      if (p.queue.max_length > 0) this.queues.set(name, new PoolQueue(name, p.queue.max_length, p.queue.max_wait));
    }
  }

  /**
   * A reloaded config: a pool that gains a queue gets one; a queue's bounds change for the waiters that
   * come next (those waiting keep their place and their deadline); a pool whose queue is gone (removed,
   * or max_length 0) answers its waiters 429, as a saturated pool answers without a queue.
   */
  reconfigure(config: Config): void {
    for (const [name, p] of Object.entries(config.pools)) {
      if (p.queue.max_length === 0) continue;
      const q = this.queues.get(name);
      if (!q) {
        this.queues.set(name, new PoolQueue(name, p.queue.max_length, p.queue.max_wait));
        continue;
      }
      q.waiting.maxLength = p.queue.max_length;
      q.maxWaitMs = p.queue.max_wait;
    }
    for (const [name, q] of [...this.queues]) {
      const p = config.pools[name];
      if (p !== undefined && p.queue.max_length > 0) continue;
      this.queues.delete(name);
      for (const s of [...this.slots.values()].filter((s) => s.queue === q)) {
        this.take(s.waiter.item, 'evicted');
        this.refuse(s.waiter.item, errors.saturated(name, q.retryAfterS));
      }
    }
  }

  /** Queue lengths per pool and class, for infergate_queue_length. */
  lengths(): Array<{ pool: string; priority: string; length: number }> {
    const out: Array<{ pool: string; priority: string; length: number }> = [];
    for (const q of this.queues.values()) for (const p of PRIORITY_CLASSES) out.push({ pool: q.pool, priority: p, length: q.waiting.lengthOf(p) });
    return out;
  }

  /** Waiting requests of a pool (all classes). */
  waitingIn(pool: string): number {
    return this.queues.get(pool)?.waiting.length ?? 0;
  }

  /** Whether `m` must wait behind requests already queued (of its class or a more important one). */
  mustQueue(m: QueueMember): boolean {
    const q = this.queues.get(m.pool);
    return q !== undefined && q.waiting.hasWaiterAtOrAbove(m.priority);
  }

  /**
   * The pool is saturated for `m` (or others wait before it): queue it, or the refusal to answer.
   * `retryAfterS`: the picker's, when it just answered "saturated".
   */
  enqueue(m: QueueMember, retryAfterS: number | undefined): ApiError | undefined {
    const q = this.queues.get(m.pool);
    if (q && retryAfterS !== undefined) q.retryAfterS = retryAfterS;
    const ra = q?.retryAfterS ?? retryAfterS ?? 1;
    if (!q || m.priority === 'sheddable' || this.closed) return errors.saturated(m.pool, ra);
    const r = q.waiting.push(m, m.priority, m.tenant, performance.now());
    if (r.kind === 'full') return errors.saturated(m.pool, ra);
    const timer = setTimeout(() => {
      try {
        this.expire(m);
      } catch (err) {
        this.onError(err);
      }
    }, q.maxWaitMs);
    this.slots.set(m, { waiter: r.waiter, queue: q, timer });
    if (r.evicted) {
      const other = r.evicted.item;
      this.take(other, 'evicted');
      this.refuse(other, errors.saturated(m.pool, ra));
    }
    // capacity may have freed since the pick (or the newcomer queued behind others): look at the head now
    this.wake(m.pool);
    return undefined;
  }

  /** `m` ends while it may be queued (client gone, timeout, error): out of the queue, nothing dispatched. */
  leave(m: QueueMember, outcome: LeaveOutcome): void {
    this.take(m, outcome);
  }

  /** Capacity may have freed in `pool`: dispatch its queue's head while the picker finds an endpoint. */
  wake(pool: string): void {
    const q = this.queues.get(pool);
    if (!q || q.waiting.length === 0) return;
    this.toWake.add(pool);
    if (this.waking) return; // the running round looks at it
    this.waking = true;
    try {
      for (let next = this.firstToWake(); next !== undefined; next = this.firstToWake()) this.drain(next);
    } finally {
      this.waking = false;
      this.toWake.clear();
    }
  }

  /** Every pool with a waiter (a scrape brought new signals). */
  wakeAll(): void {
    for (const q of this.queues.values()) if (q.waiting.length > 0) this.wake(q.pool);
  }

  /** Shutdown: every waiter is answered 503 shutting_down; nothing is queued after this. */
  close(): void {
    this.closed = true;
    for (const q of this.queues.values()) {
      for (const w of [...this.slots.values()].filter((s) => s.queue === q).map((s) => s.waiter)) {
        this.take(w.item, 'shutdown');
        this.refuse(w.item, errors.shuttingDown());
      }
    }
  }

  private firstToWake(): PoolQueue | undefined {
    for (const pool of this.toWake) {
      this.toWake.delete(pool);
      const q = this.queues.get(pool);
      if (q && q.waiting.length > 0) return q;
    }
    return undefined;
  }

  private drain(q: PoolQueue): void {
    for (let w = q.waiting.peek(); w; w = q.waiting.peek()) {
      const m = w.item;
      let pick: PickResult;
      try {
        pick = m.pickFromQueue();
      } catch (err) {
        this.take(m, 'error');
        this.internal(m, err);
        continue;
      }
      if (pick.kind === 'saturated') {
        q.retryAfterS = pick.retryAfterS;
        return;
      }
      q.waiting.shift(); // the head (`w`): shifting passes the turn to the next tenant of its class
      this.take(m, 'dispatched');
      try {
        m.dequeued(pick);
      } catch (err) {
        this.internal(m, err);
      }
    }
  }

  private expire(m: QueueMember): void {
    const slot = this.slots.get(m);
    if (!slot) return;
    const waitedS = Math.round((performance.now() - slot.waiter.since) / 100) / 10;
    this.take(m, 'expired');
    this.refuse(m, errors.queueTimeout(m.pool, waitedS, slot.queue.retryAfterS));
  }

  /** Out of the queue (if still in it: `remove` does not pass the tenant's turn), timer cleared, the wait observed. */
  private take(m: QueueMember, outcome: LeaveOutcome): void {
    const slot = this.slots.get(m);
    if (!slot) return;
    this.slots.delete(m);
    clearTimeout(slot.timer);
    if (slot.waiter.queued) slot.queue.waiting.remove(slot.waiter);
    this.metrics.queueWait.observe({ pool: m.pool, priority: m.priority, outcome }, (performance.now() - slot.waiter.since) / 1000);
  }

  private refuse(m: QueueMember, e: ApiError): void {
    try {
      m.refusedFromQueue(e);
    } catch (err) {
      this.internal(m, err);
    }
  }

  private internal(m: QueueMember, err: unknown): void {
    try {
      m.onInternalError(err);
    } catch (e) {
      this.onError(e);
    }
  }
}
