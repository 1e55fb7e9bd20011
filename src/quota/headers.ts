/**
 * A quota decision as the client sees it: OpenAI's x-ratelimit-* headers, and the 429 (or 503) of a
 * refusal. Pure.
 */
import { errors, type ApiError } from '../openai/errors.js';
import type { QuotaDecision } from './types.js';

/**
 * A duration as OpenAI writes x-ratelimit-reset-*: Go's time.Duration text at millisecond precision,
 * rounded up ("0s", "120ms", "1s", "1.5s", "6m0s", "1h0m0s").
 */
export function formatResetDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  const total = Math.ceil(ms);
  if (total < 1000) return `${total}ms`;
  const h = Math.floor(total / 3_600_000);
  const m = Math.floor((total % 3_600_000) / 60_000);
  const sMs = total % 60_000;
  const whole = Math.floor(sMs / 1000);
  const frac = sMs % 1000;
  const s = frac === 0 ? `${whole}s` : `${whole}.${String(frac).padStart(3, '0').replace(/0+$/, '')}s`;
  if (h > 0) return `${h}h${m}m${s}`;
  if (m > 0) return `${m}m${s}`;
  return s;
}

/**
 * The x-ratelimit-* headers for a decision (lower-case names, as the front writes them): the requests
 * family when requests_per_minute counted it, the tokens family when tokens_per_minute did; none for an
 * unlimited tenant or one let through uncounted. Remaining counts are whole and never below 0.
 */
export function rateLimitHeaders(d: QuotaDecision): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (d.limits.requestsPerMinute !== undefined && d.remainingRequests !== undefined) {
    out.push(
      ['x-ratelimit-limit-requests', String(d.limits.requestsPerMinute)],
      ['x-ratelimit-remaining-requests', String(Math.max(0, Math.floor(d.remainingRequests)))],
      ['x-ratelimit-reset-requests', formatResetDuration(d.resetRequestsMs ?? 0)],
    );
  }
  if (d.limits.tokensPerMinute !== undefined && d.remainingTokens !== undefined) {
    out.push(
      ['x-ratelimit-limit-tokens', String(d.limits.tokensPerMinute)],
      ['x-ratelimit-remaining-tokens', String(Math.max(0, Math.floor(d.remainingTokens)))],
      ['x-ratelimit-reset-tokens', formatResetDuration(d.resetTokensMs ?? 0)],
    );
  }
  return out;
}

/** The client error for a refused decision: 429 rate_limit_exceeded with Retry-After, or 503 quota_unavailable. */
export function quotaError(d: QuotaDecision): ApiError {
  const retry = d.retryAfterS ?? 1;
  switch (d.reason) {
    case 'requests':
      return errors.rateLimited(d.tenant, 'requests per minute', d.limits.requestsPerMinute ?? 0, retry);
    case 'tokens':
      return errors.rateLimited(d.tenant, 'tokens per minute', d.limits.tokensPerMinute ?? 0, retry);
    case 'concurrency':
      return errors.rateLimited(d.tenant, 'concurrent requests', d.limits.maxConcurrent ?? 0, retry);
    default:
      return errors.quotaUnavailable();
  }
}
