/**
 * Tenant quotas: admission of a request against its tenant's requests_per_minute, tokens_per_minute and
 * max_concurrent, in this process (quota.backend: memory) or shared through Redis (redis), with
 * quota.on_backend_error deciding while Redis cannot answer in time. What admission returns carries the
 * response headers, a refusal's error, and the lease that corrects the token count and frees the
 * concurrency slot at the request's end. See README.md for how the gateway calls it.
 */
import type { QuotaConfig, TenantsConfig } from '../config/schema.js';
import { MemoryLimiter } from './memory.js';
import { TenantTable } from './limits.js';
import { RedisStore } from './redis.js';
import { NO_LEASE, type DecisionSource, type Outcome, type QuotaDecision, type QuotaLease, type TenantLimits } from './types.js';

/** The backend-down warning is logged at most this often. */
const DOWN_LOG_INTERVAL_MS = 60_000;
/** The most tokens one reconcile may report (usage comes from the model server's answer). */
const MAX_TOKENS = 1e9;

export interface QuotaLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface QuotaDeps {
  logger?: QuotaLogger;
  /** called when the store starts or stops answering (infergate_quota_backend_up) */
  onBackendUp?: (up: boolean) => void;
  /** the clock of the in-memory counts (tests drive it); Redis uses its own */
  now?: () => number;
}

function tokens(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), MAX_TOKENS) : 0;
}

/** Where a lease's work goes. */
interface LeaseStore {
  charge(tenant: string, limits: TenantLimits, delta: number): void;
  release(tenant: string, id: string): void;
}

class Lease implements QuotaLease {
  private settled = false;
  private released = false;

  constructor(
    private readonly store: LeaseStore,
    private readonly tenant: string,
    private readonly limits: TenantLimits,
    private readonly estimate: number,
    private readonly id: string,
  ) {}

  reconcile(actualPromptTokens: number, completionTokens: number): void {
    if (this.settled) return;
    this.settled = true;
    if (this.limits.tokensPerMinute === undefined) return;
    const prompt = Number.isFinite(actualPromptTokens) && actualPromptTokens >= 0 ? tokens(actualPromptTokens) : this.estimate;
    const delta = prompt + tokens(completionTokens) - this.estimate;
    if (delta !== 0) this.store.charge(this.tenant, this.limits, delta);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    if (this.limits.maxConcurrent !== undefined) this.store.release(this.tenant, this.id);
  }
}

export class Quota {
  private table: TenantTable;
  /** quota.backend: memory, or the on_backend_error: local fallback */
  private readonly memory: MemoryLimiter;
  private readonly redis: RedisStore | undefined;
  private readonly onError: QuotaConfig['on_backend_error'];
  private readonly backend: QuotaConfig['backend'];
  private readonly memoryLeases: LeaseStore;
  private readonly redisLeases: LeaseStore;
  private up = true;
  private lastDownLog = -Infinity;
  private downLogged = false;

  constructor(tenants: TenantsConfig, config: QuotaConfig, private readonly deps: QuotaDeps = {}) {
    this.table = new TenantTable(tenants);
    this.memory = new MemoryLimiter(deps.now);
    this.onError = config.on_backend_error;
    this.backend = config.backend;
    this.memoryLeases = {
      charge: (tenant, limits, delta) => this.memory.charge(tenant, limits, delta),
      release: (tenant) => this.memory.release(tenant),
    };
    this.redisLeases = {
      charge: (tenant, limits, delta) => {
        this.redis!.charge(tenant, limits, delta).catch((err: Error) => this.down(err));
      },
      release: (tenant, id) => {
        this.redis!.release(tenant, id).catch((err: Error) => this.down(err));
      },
    };
    if (config.backend === 'redis' && this.table.anyLimit) {
      if (config.redis.url === undefined) throw new Error('quota.backend "redis" needs quota.redis.url');
      this.up = false; // until the first connection is ready
      deps.onBackendUp?.(false);
      this.redis = new RedisStore(
        { url: config.redis.url, keyPrefix: config.redis.key_prefix, timeoutMs: config.redis.timeout, leaseTtlMs: config.redis.lease_ttl },
        { up: () => this.markUp(), down: (err) => this.down(err) },
      );
    }
  }

  /** Some tenant has some limit: otherwise admission lets everything through and counts nothing. */
  get enabled(): boolean {
    return this.table.anyLimit;
  }

  /**
   * New tenant limits (a config reload): requests admitted from now on get them; leases already held keep
   * the limits they were admitted with. False, and nothing changes, when limits appear under
   * quota.backend redis while the gateway started without any (no store was connected: a restart is needed).
   */
  setTenants(tenants: TenantsConfig): boolean {
    const table = new TenantTable(tenants);
    if (table.anyLimit && this.backend === 'redis' && !this.redis) return false;
    this.table = table;
    return true;
  }

  /** The shared store answers (always true without one). */
  get backendUp(): boolean {
    return this.up;
  }

  limitsFor(tenant: string): TenantLimits {
    return this.table.limitsFor(tenant);
  }

  /**
   * Admission of one request of `tenant` whose prompt is estimated at `promptTokens`. Never rejects (a
   * store failure becomes on_backend_error's decision) and, with Redis, settles within quota.redis.timeout.
   * An admitted request's lease must be released at its end, whatever the end.
   */
  admit(tenant: string, promptTokens: number): Promise<QuotaDecision> {
    const limits = this.table.limitsFor(tenant);
    const need = tokens(promptTokens);
    if (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined && limits.maxConcurrent === undefined) {
      return Promise.resolve({ allowed: true, tenant, limits, source: 'unlimited', lease: NO_LEASE });
    }
    if (!this.redis) return Promise.resolve(this.admitLocally(tenant, limits, need, 'memory'));
    if (!this.redis.connected) return Promise.resolve(this.fallback(tenant, limits, need));
    const id = this.redis.newLeaseId();
    return this.redis.admit(tenant, limits, need, id).then(
      (o) => decision(tenant, limits, o, 'redis', new Lease(this.redisLeases, tenant, limits, need, id)),
      (err: Error) => {
        this.down(err);
        return this.fallback(tenant, limits, need);
      },
    );
  }

  private admitLocally(tenant: string, limits: TenantLimits, need: number, source: DecisionSource): QuotaDecision {
    const o = this.memory.admit(tenant, limits, need);
    return decision(tenant, limits, o, source, new Lease(this.memoryLeases, tenant, limits, need, ''));
  }

  /** Redis could not answer: quota.on_backend_error. */
  private fallback(tenant: string, limits: TenantLimits, need: number): QuotaDecision {
    switch (this.onError) {
      case 'allow':
        return { allowed: true, tenant, limits, source: 'allow', lease: NO_LEASE };
      case 'deny':
        return { allowed: false, tenant, limits, source: 'deny', reason: 'backend', retryAfterS: 1, lease: NO_LEASE };
      default:
        return this.admitLocally(tenant, limits, need, 'local');
    }
  }

  private markUp(): void {
    if (this.up) return;
    this.up = true;
    this.deps.onBackendUp?.(true);
    if (this.downLogged) {
      this.downLogged = false;
      this.deps.logger?.info({ backend: 'redis' }, 'quota backend answers again');
    }
  }

  private down(err: Error): void {
    if (this.up) {
      this.up = false;
      this.deps.onBackendUp?.(false);
    }
    const now = Date.now();
    if (now - this.lastDownLog >= DOWN_LOG_INTERVAL_MS) {
      this.lastDownLog = now;
      this.downLogged = true;
      this.deps.logger?.warn(
        { backend: 'redis', err: err.message, on_backend_error: this.onError },
        'quota backend unavailable (logged at most once a minute while it lasts)',
      );
    }
  }

  /** Stops the renewal timer and closes the Redis connection (its leases then expire after lease_ttl). */
  async close(): Promise<void> {
    await this.redis?.close();
  }

  /** For tests: the in-process counts' requests in flight of a tenant, the Redis leases held here, and work owed to Redis. */
  debugState(tenant: string): { localInFlight: number; redisLeases: number; owed: { charges: number; releases: number; dropped: number } } {
    return {
      localInFlight: this.memory.inFlight(tenant),
      redisLeases: this.redis?.heldLeases ?? 0,
      owed: this.redis?.owed ?? { charges: 0, releases: 0, dropped: 0 },
    };
  }
}

function decision(tenant: string, limits: TenantLimits, o: Outcome, source: DecisionSource, lease: QuotaLease): QuotaDecision {
  const d: QuotaDecision = { allowed: o.reason === undefined, tenant, limits, source, lease: o.reason === undefined ? lease : NO_LEASE };
  if (limits.requestsPerMinute !== undefined) {
    d.remainingRequests = o.requests;
    d.resetRequestsMs = o.resetRequestsMs;
  }
  if (limits.tokensPerMinute !== undefined) {
    d.remainingTokens = o.tokens;
    d.resetTokensMs = o.resetTokensMs;
  }
  if (o.reason !== undefined) {
    d.reason = o.reason;
    d.retryAfterS = Math.max(1, Math.ceil(o.waitMs / 1000));
  }
  return d;
}
