/**
 * Tenant quotas shared by every gateway that uses the same Redis: the memory store's arithmetic (a token
 * bucket per tenant and limit, see memory.ts) run atomically in Lua scripts (ioredis defineCommand:
 * EVALSHA, EVAL again after a Redis restart emptied its script cache), on Redis's own clock (TIME), so
 * gateways on machines whose clocks differ still agree.
 *
 * Keys, under quota.redis.key_prefix: `b:<tenant>` a hash {r, t, ts} (levels and when they were last
 * updated; it expires once the buckets would be full again, so an idle tenant costs nothing), and
 * `c:<tenant>` a sorted set of the tenant's concurrency leases scored by their expiry: each admission first
 * drops the expired ones, and this process renews its live leases every third of quota.redis.lease_ttl,
 * so the slots of a gateway that died come back after at most lease_ttl.
 *
 * Every command has quota.redis.timeout (ioredis commandTimeout) and nothing is queued while the
 * connection is down (enableOfflineQueue: false): a call fails fast and the caller applies
 * quota.on_backend_error. ioredis reconnects by itself (every 50 ms to 1 s).
 *
 * Work owed while the connection is down is kept and sent when it is back: token reconciliations, summed
 * per tenant, and lease releases (so a slot comes back at once rather than after lease_ttl). Only work that
 * was never sent is kept: a command that timed out may still have run, and a charge sent twice would count
 * twice. Both are bounded (OWED_MAX entries each); past that, the oldest are dropped and counted.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Outcome, TenantLimits } from './types.js';

// Shared Lua: Redis's clock in ms; a tenant's levels refilled to now; the levels stored with an expiry
// at the moment both buckets would be full again.
const LUA_COMMON = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function levels(key, rpm, tpm, now)
  local h = redis.call('HMGET', key, 'r', 't', 'ts')
  local r, t = rpm, tpm
  local ts = tonumber(h[3])
  if ts then
    local el = now - ts
    if el < 0 then el = 0 end
    local r0, t0 = tonumber(h[1]), tonumber(h[2])
    if r0 then r = math.min(rpm, r0 + el * rpm / 60000) end
    if t0 then t = math.min(tpm, t0 + el * tpm / 60000) end
  end
  return r, t
end
local function store(key, rpm, tpm, r, t, now)
  redis.call('HSET', key, 'r', tostring(r), 't', tostring(t), 'ts', tostring(now))
  local full = 0
  if rpm > 0 then full = math.max(full, (rpm - r) * 60000 / rpm) end
  if tpm > 0 then full = math.max(full, (tpm - t) * 60000 / tpm) end
  redis.call('PEXPIRE', key, math.ceil(full) + 1000)
end
`;

/**
 * KEYS: bucket, leases. ARGV: rpm, tpm, max_concurrent (0: no such limit), prompt estimate, lease id,
 * lease ttl ms. Returns {reason ('' = admitted), r, resetR ms, t, resetT ms, wait ms, in flight}.
 * The rule is judge() in memory.ts.
 */
const ADMIT = `${LUA_COMMON}
local rpm, tpm, maxc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local need, ttl = tonumber(ARGV[4]), tonumber(ARGV[6])
local now = clock()
local r, t = levels(KEYS[1], rpm, tpm, now)
local why, wait = '', 0
if rpm > 0 and r < 1 then
  why = 'requests'
  wait = (1 - r) * 60000 / rpm
end
if tpm > 0 then
  local want = math.min(need, tpm)
  if t < want then
    local w = (want - t) * 60000 / tpm
    if why == '' or w > wait then
      why = 'tokens'
      wait = w
    end
  end
end
local inflight = 0
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  inflight = redis.call('ZCARD', KEYS[2])
  if why == '' and inflight >= maxc then
    why = 'concurrency'
    wait = 1000
  end
end
if why == '' then
  if rpm > 0 then r = r - 1 end
  if tpm > 0 then t = t - need end
  if maxc > 0 then
    redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
    redis.call('PEXPIRE', KEYS[2], ttl * 2)
    inflight = inflight + 1
  end
end
if rpm > 0 or tpm > 0 then store(KEYS[1], rpm, tpm, r, t, now) end
local resetR, resetT = 0, 0
if rpm > 0 then resetR = (rpm - r) * 60000 / rpm end
if tpm > 0 and t < tpm then resetT = (tpm - t) * 60000 / tpm end
return { why, tostring(r), tostring(resetR), tostring(t), tostring(resetT), tostring(wait), inflight }
`;

/** KEYS: bucket. ARGV: rpm, tpm, delta tokens (negative gives back, up to the limit). */
const CHARGE = `${LUA_COMMON}
local rpm, tpm, delta = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm <= 0 then return 0 end
local now = clock()
local r, t = levels(KEYS[1], rpm, tpm, now)
t = math.min(tpm, t - delta)
store(KEYS[1], rpm, tpm, r, t, now)
return 1
`;

/** KEYS: lease sets. ARGV[1]: ttl ms; ARGV[i + 1]: the lease id in KEYS[i]. Renews only leases still there. */
const RENEW = `${LUA_COMMON}
local now = clock()
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', key, ttl * 2)
end
return #KEYS
`;

/** leases renewed by one script call (a call's arguments stay small) */
const RENEW_BATCH = 500;

/** owed charges (tenants) and owed releases kept while Redis is away, each */
export const OWED_MAX = 10_000;

interface Scripted {
  quotaAdmit(bucket: string, leases: string, ...argv: Array<string | number>): Promise<unknown>;
  quotaCharge(bucket: string, ...argv: Array<string | number>): Promise<unknown>;
  quotaRenew(numKeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
}

export interface RedisStoreOptions {
  url: string;
  keyPrefix: string;
  timeoutMs: number;
  leaseTtlMs: number;
}

/** The store's health as its caller sees it: every answer, failure and connection change. */
export interface RedisStoreEvents {
  up(): void;
  down(err: Error): void;
}

function num(v: unknown): number {
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
}

export class RedisStore {
  private readonly client: Redis & Scripted;
  /** this process's live leases: id → its set's key, renewed until released */
  private readonly held = new Map<string, string>();
  private readonly renewTimer: NodeJS.Timeout;
  private readonly idPrefix = randomUUID();
  private nextId = 0;
  private closed = false;
  /** bucket key → the limits it was charged under and the tokens still to charge there */
  private readonly owedCharges = new Map<string, { rpm: number; tpm: number; delta: number }>();
  /** lease id → its set's key: releases that could not be sent */
  private readonly owedReleases = new Map<string, string>();
  private owedDropped = 0;

  constructor(
    private readonly opts: RedisStoreOptions,
    private readonly events: RedisStoreEvents,
  ) {
    const client = new Redis(opts.url, {
      commandTimeout: opts.timeoutMs,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      enableAutoPipelining: true,
      connectTimeout: Math.max(1000, opts.timeoutMs * 20),
      retryStrategy: (times: number) => Math.min(50 * times, 1000),
    });
    client.defineCommand('quotaAdmit', { numberOfKeys: 2, lua: ADMIT });
    client.defineCommand('quotaCharge', { numberOfKeys: 1, lua: CHARGE });
    client.defineCommand('quotaRenew', { lua: RENEW });
    this.client = client as Redis & Scripted;
    client.on('ready', () => {
      this.events.up();
      this.payOwed();
    });
    client.on('close', () => {
      if (!this.closed) this.events.down(new Error('connection to Redis closed'));
    });
    // ioredis reports each failed (re)connection here; without a listener it would print them itself
    client.on('error', (err: Error) => {
      if (!this.closed) this.events.down(err);
    });
    this.renewTimer = setInterval(() => this.renew(), Math.max(1000, Math.floor(opts.leaseTtlMs / 3)));
    this.renewTimer.unref();
  }

  /** Whether the connection is up now (a command would be sent rather than refused at once). */
  get connected(): boolean {
    return this.client.status === 'ready';
  }

  newLeaseId(): string {
    return `${this.idPrefix}:${++this.nextId}`;
  }

  private key(kind: 'b' | 'c', tenant: string): string {
    return `${this.opts.keyPrefix}${kind}:${tenant}`;
  }

  async admit(tenant: string, limits: TenantLimits, need: number, leaseId: string): Promise<Outcome> {
    const leases = this.key('c', tenant);
    const reply = (await this.client.quotaAdmit(
      this.key('b', tenant),
      leases,
      limits.requestsPerMinute ?? 0,
      limits.tokensPerMinute ?? 0,
      limits.maxConcurrent ?? 0,
      need,
      leaseId,
      this.opts.leaseTtlMs,
    )) as unknown[];
    const why = String(reply[0] ?? '');
    const reason = why === 'requests' || why === 'tokens' || why === 'concurrency' ? why : undefined;
    if (reason === undefined && limits.maxConcurrent !== undefined) this.held.set(leaseId, leases);
    this.events.up();
    return {
      reason,
      requests: num(reply[1]),
      resetRequestsMs: num(reply[2]),
      tokens: num(reply[3]),
      resetTokensMs: num(reply[4]),
      waitMs: num(reply[5]),
    };
  }

  async charge(tenant: string, limits: TenantLimits, delta: number): Promise<void> {
    if (limits.tokensPerMinute === undefined || delta === 0) return;
    await this.chargeKey(this.key('b', tenant), limits.requestsPerMinute ?? 0, limits.tokensPerMinute, delta);
  }

  private async chargeKey(key: string, rpm: number, tpm: number, delta: number): Promise<void> {
    if (!this.connected) {
      const owed = this.owedCharges.get(key);
      if (owed) {
        owed.delta += delta;
        owed.rpm = rpm;
        owed.tpm = tpm;
      } else {
        this.makeRoom(this.owedCharges);
        this.owedCharges.set(key, { rpm, tpm, delta });
      }
      return;
    }
    await this.client.quotaCharge(key, rpm, tpm, delta);
    this.events.up();
  }

  /** Gives the lease's slot back; it is no longer renewed even if Redis cannot be told now (it then expires). */
  async release(tenant: string, leaseId: string): Promise<void> {
    if (!this.held.delete(leaseId)) return;
    await this.releaseKey(this.key('c', tenant), leaseId);
  }

  private async releaseKey(key: string, leaseId: string): Promise<void> {
    if (!this.connected) {
      this.makeRoom(this.owedReleases);
      this.owedReleases.set(leaseId, key);
      return;
    }
    await this.client.zrem(key, leaseId);
    this.events.up();
  }

  private makeRoom(owed: Map<string, unknown>): void {
    if (owed.size < OWED_MAX) return;
    const oldest = owed.keys().next().value;
    if (oldest !== undefined) owed.delete(oldest);
    this.owedDropped++;
  }

  /** Sends what was owed while the connection was down (called when it is ready again). */
  private payOwed(): void {
    const charges = [...this.owedCharges];
    const releases = [...this.owedReleases];
    this.owedCharges.clear();
    this.owedReleases.clear();
    for (const [key, c] of charges) this.chargeKey(key, c.rpm, c.tpm, c.delta).catch((err: Error) => this.events.down(err));
    for (const [id, key] of releases) this.releaseKey(key, id).catch((err: Error) => this.events.down(err));
  }

  /** Work kept for when Redis is back, and how much was dropped past OWED_MAX (for tests and debugging). */
  get owed(): { charges: number; releases: number; dropped: number } {
    return { charges: this.owedCharges.size, releases: this.owedReleases.size, dropped: this.owedDropped };
  }

  /** Leases this process holds (for tests). */
  get heldLeases(): number {
    return this.held.size;
  }

  private renew(): void {
    if (this.held.size === 0 || !this.connected) return;
    let keys: string[] = [];
    let ids: string[] = [];
    for (const [id, key] of this.held) {
      keys.push(key);
      ids.push(id);
      if (keys.length === RENEW_BATCH) {
        this.renewSome(keys, ids);
        keys = [];
        ids = [];
      }
    }
    if (keys.length > 0) this.renewSome(keys, ids);
  }

  private renewSome(keys: string[], ids: string[]): void {
    this.client.quotaRenew(keys.length, ...keys, this.opts.leaseTtlMs, ...ids).then(
      () => this.events.up(),
      (err: Error) => this.events.down(err),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewTimer);
    this.client.disconnect();
  }
}
