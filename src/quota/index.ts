/** Tenant quotas (README.md): admission, its headers and errors, the stores. */
export { Quota, type QuotaDeps, type QuotaLogger } from './quota.js';
export { rateLimitHeaders, quotaError, formatResetDuration } from './headers.js';
export { MemoryLimiter } from './memory.js';
export { TenantTable } from './limits.js';
export { NO_LEASE, type QuotaDecision, type QuotaLease, type TenantLimits, type RefusalReason, type DecisionSource } from './types.js';
