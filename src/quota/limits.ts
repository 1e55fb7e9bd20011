/** tenants.default and tenants.overrides.<tenant> as limits per tenant. Pure. */
import type { TenantsConfig } from '../config/schema.js';
import type { TenantLimits } from './types.js';

type Raw = TenantsConfig['default'];

function fromRaw(raw: Raw, base: TenantLimits): TenantLimits {
  const out: TenantLimits = {};
  const rpm = raw.requests_per_minute ?? base.requestsPerMinute;
  const tpm = raw.tokens_per_minute ?? base.tokensPerMinute;
  const conc = raw.max_concurrent ?? base.maxConcurrent;
  if (rpm !== undefined) out.requestsPerMinute = rpm;
  if (tpm !== undefined) out.tokensPerMinute = tpm;
  if (conc !== undefined) out.maxConcurrent = conc;
  return out;
}

export function hasLimit(l: TenantLimits): boolean {
  return l.requestsPerMinute !== undefined || l.tokensPerMinute !== undefined || l.maxConcurrent !== undefined;
}

/** Each tenant's limits: an override's missing keys take the default's; a tenant without override gets the default. */
export class TenantTable {
  readonly defaults: TenantLimits;
  private readonly overrides = new Map<string, TenantLimits>();
  /** some tenant has some limit (else admission counts nothing) */
  readonly anyLimit: boolean;

  constructor(cfg: TenantsConfig) {
    this.defaults = fromRaw(cfg.default, {});
    let any = hasLimit(this.defaults);
    for (const [name, raw] of Object.entries(cfg.overrides)) {
      const l = fromRaw(raw, this.defaults);
      this.overrides.set(name, l);
      any ||= hasLimit(l);
    }
    this.anyLimit = any;
  }

  limitsFor(tenant: string): TenantLimits {
    return this.overrides.get(tenant) ?? this.defaults;
  }
}
