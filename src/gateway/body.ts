/**
 * Request bodies while they arrive. Each body is gathered into one buffer that grows by doubling (up to the
 * route's limit), so a body costs about its own bytes whatever its chunking: a body sent one byte per chunk
 * used to cost a Buffer object per byte (~100 bytes of heap each). And all bodies being gathered share one
 * budget (`limits.max_buffered_body_bytes`): past it a request is refused (503) instead of allocating, and
 * a body's share returns to the budget as soon as it is handed on or its client leaves. The exchange that
 * takes a body then holds its bytes in the same budget until it ends (exchange.ts, onBody and finish).
 */
import { EMPTY } from './buffers.js';

/** The bytes that bodies being gathered may hold, all connections together. */
export class BodyBudget {
  inUse = 0;
  constructor(readonly limit: number) {}

  reserve(n: number): boolean {
    if (this.inUse + n > this.limit) return false;
    this.inUse += n;
    return true;
  }

  release(n: number): void {
    this.inUse -= n;
  }
}

/** The first buffer of a body that comes in several chunks (grown by doubling from here). */
const FIRST_CAPACITY = 16 * 1024;

export type AddResult = 'ok' | 'too_large' | 'no_budget';

/** One body being gathered. After `too_large`, `no_budget`, take() or drop(), it holds nothing. */
export class BodyCollector {
  private buf: Buffer | undefined;
  private size = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly budget: BodyBudget,
  ) {}

  /** Copies `chunk` in (the caller's memory may be reused once this returns). */
  add(chunk: Uint8Array): AddResult {
    const need = this.size + chunk.length;
    if (need > this.maxBytes) {
      this.drop();
      return 'too_large';
    }
    if (chunk.length === 0) return 'ok';
    const cap = this.buf?.length ?? 0;
    if (need > cap) {
      let next = Math.max(FIRST_CAPACITY, cap * 2);
      while (next < need) next *= 2;
      next = Math.min(next, this.maxBytes);
      if (!this.budget.reserve(next - cap)) {
        this.drop();
        return 'no_budget';
      }
      const grown = Buffer.allocUnsafe(next);
      if (this.buf) this.buf.copy(grown, 0, 0, this.size);
      this.buf = grown;
    }
    this.buf!.set(chunk, this.size);
    this.size = need;
    return 'ok';
  }

  /** The whole body (its share of the budget is returned: the body is the exchange's now). */
  take(): Buffer {
    const body = this.buf ? this.buf.subarray(0, this.size) : EMPTY;
    if (this.buf) this.budget.release(this.buf.length);
    this.buf = undefined;
    this.size = 0;
    return body;
  }

  /** Forget what was gathered (its client left, or it was refused). */
  drop(): void {
    if (this.buf) this.budget.release(this.buf.length);
    this.buf = undefined;
    this.size = 0;
  }
}

/** A body being received, for the slow-upload sweep: when uWS's timer was last set for it, and the bytes since. */
export class Upload {
  sinceMark = 0;
  prev: Upload | null = null;
  next: Upload | null = null;
  listed = false;
  constructor(
    public markedAt: number,
    /** refuse it (408); the front drops the rest */
    readonly tooSlow: () => void,
  ) {}
}

/**
 * The bodies under way on one listener, as a doubly linked list: adding and removing one per request
 * allocates nothing. (A Set reallocates its table as it grows and shrinks with the load, and the tables of a
 * long-lived Set live long enough to be promoted to the old generation: about 180 bytes per request of
 * old-generation garbage under load, measured with V8's sampling heap profiler.)
 */
export class Uploads {
  private head: Upload | null = null;
  size = 0;

  add(u: Upload): void {
    if (u.listed) return;
    u.listed = true;
    u.prev = null;
    u.next = this.head;
    if (this.head) this.head.prev = u;
    this.head = u;
    this.size++;
  }

  /** Takes it out; idempotent. */
  delete(u: Upload): void {
    if (!u.listed) return;
    u.listed = false;
    if (u.prev) u.prev.next = u.next;
    else this.head = u.next;
    if (u.next) u.next.prev = u.prev;
    u.prev = u.next = null;
    this.size--;
  }

  /** Takes out and returns those last marked before `before` (a refusal may then change the list freely). */
  takeMarkedBefore(before: number): Upload[] {
    const out: Upload[] = [];
    for (let u = this.head; u !== null; u = u.next) if (u.markedAt < before) out.push(u);
    for (const u of out) this.delete(u);
    return out;
  }
}
