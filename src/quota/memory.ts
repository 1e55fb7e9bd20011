/**
 * Tenant quotas counted in this process: a token bucket per tenant and limit, refilled continuously at
 * limit/60 s and holding at most one minute's worth (so a tenant may burst up to its per-minute limit,
 * then goes at the limit's pace), and a count of requests in flight. The Redis store (redis.ts) runs the
 * same arithmetic in Lua. The clock is an argument, so tests drive time.
 */
import type { Outcome, TenantLimits } from './types.js';

const MINUTE_MS = 60_000;

interface Entry {
  /** requests left (≤ requests_per_minute) */
  r: number;
  /** tokens left (≤ tokens_per_minute; negative while in debt) */
  t: number;
  /** when r and t were last brought up to date, ms */
  ts: number;
  inFlight: number;
}

/** `level` refilled over `elapsed` ms at `limit` per minute, at most `limit`. */
function refilled(level: number, limit: number, elapsed: number): number {
  return Math.min(limit, level + (elapsed * limit) / MINUTE_MS);
}

/** ms until a bucket at `level` is full again at `limit` per minute. */
export function msUntilFull(level: number, limit: number | undefined): number {
  return limit === undefined || level >= limit ? 0 : ((limit - level) * MINUTE_MS) / limit;
}

/**
 * The admission rule both stores follow, on levels already refilled: refused while the requests bucket
 * holds less than one request, or the tokens bucket less than the prompt estimate (or than the whole
 * per-minute limit, for a prompt larger than that: it goes once the bucket is full and leaves it in debt);
 * the longer wait of the two names the reason. Then max_concurrent (Retry-After 1 s: a slot frees when
 * some request ends).
 */
export function judge(
  limits: TenantLimits,
  r: number,
  t: number,
  need: number,
  inFlight: number,
): { reason: Outcome['reason']; waitMs: number } {
  let reason: Outcome['reason'];
  let waitMs = 0;
  const rpm = limits.requestsPerMinute;
  const tpm = limits.tokensPerMinute;
  if (rpm !== undefined && r < 1) {
    reason = 'requests';
    waitMs = ((1 - r) * MINUTE_MS) / rpm;
  }
  if (tpm !== undefined) {
    const want = Math.min(need, tpm);
    if (t < want) {
      const w = ((want - t) * MINUTE_MS) / tpm;
      if (reason === undefined || w > waitMs) {
        reason = 'tokens';
        waitMs = w;
      }
    }
  }
  if (reason === undefined && limits.maxConcurrent !== undefined && inFlight >= limits.maxConcurrent) {
    reason = 'concurrency';
    waitMs = 1000;
  }
  return { reason, waitMs };
}

export class MemoryLimiter {
  private readonly tenants = new Map<string, Entry>();
  private lastSweep: number;

  constructor(private readonly now: () => number = Date.now) {
    this.lastSweep = now();
  }

  /** Tenants with state held (full, idle buckets are forgotten about once a minute). */
  get size(): number {
    return this.tenants.size;
  }

  /** Counts one request of `need` estimated prompt tokens against `limits` if they allow it. */
  admit(tenant: string, limits: TenantLimits, need: number): Outcome {
    const now = this.now();
    if (now - this.lastSweep >= MINUTE_MS) this.sweep(now);
    const e = this.entry(tenant, limits, now);
    const { reason, waitMs } = judge(limits, e.r, e.t, need, e.inFlight);
    if (reason === undefined) {
      if (limits.requestsPerMinute !== undefined) e.r -= 1;
      if (limits.tokensPerMinute !== undefined) e.t -= need;
      if (limits.maxConcurrent !== undefined) e.inFlight++;
    }
    return {
      reason,
      waitMs,
      requests: e.r,
      resetRequestsMs: msUntilFull(e.r, limits.requestsPerMinute),
      tokens: e.t,
      resetTokensMs: msUntilFull(e.t, limits.tokensPerMinute),
    };
  }

  /** Charges `delta` more tokens (negative: gives some back, up to the limit). */
  charge(tenant: string, limits: TenantLimits, delta: number): void {
    const tpm = limits.tokensPerMinute;
    if (tpm === undefined || delta === 0) return;
    const e = this.entry(tenant, limits, this.now());
    e.t = Math.min(tpm, e.t - delta);
  }

  /** One request of the tenant that counted against max_concurrent is over. */
  release(tenant: string): void {
    const e = this.tenants.get(tenant);
    if (e && e.inFlight > 0) e.inFlight--;
  }

  /** Requests of the tenant in flight (for tests and debugging). */
  inFlight(tenant: string): number {
    return this.tenants.get(tenant)?.inFlight ?? 0;
  }

  private entry(tenant: string, limits: TenantLimits, now: number): Entry {
    let e = this.tenants.get(tenant);
    if (e === undefined) {
      e = { r: limits.requestsPerMinute ?? 0, t: limits.tokensPerMinute ?? 0, ts: now, inFlight: 0 };
      this.tenants.set(tenant, e);
      return e;
    }
    const elapsed = Math.max(0, now - e.ts);
    if (limits.requestsPerMinute !== undefined) e.r = refilled(e.r, limits.requestsPerMinute, elapsed);
    if (limits.tokensPerMinute !== undefined) e.t = refilled(e.t, limits.tokensPerMinute, elapsed);
    e.ts = now;
    return e;
  }

  /** Forgets tenants with nothing in flight whose buckets have been refilled to the brim: a new entry is the same. */
  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [tenant, e] of this.tenants) {
      // a full minute idle refills any bucket that was not in debt; a debt takes longer and is kept
      if (e.inFlight === 0 && now - e.ts >= MINUTE_MS && e.r >= 0 && e.t >= 0) this.tenants.delete(tenant);
    }
  }
}
