/** What the quota room hands out and what its stores answer. Types only. */

/** One tenant's limits; an absent one is no limit. */
export interface TenantLimits {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  maxConcurrent?: number;
}

/** Which limit refused a request; `backend`: the shared store did not answer and on_backend_error is deny. */
export type RefusalReason = 'requests' | 'tokens' | 'concurrency' | 'backend';

/** Where a decision was made. */
export type DecisionSource =
  | 'unlimited' // the tenant has no limit: nothing was counted
  | 'memory' // quota.backend: memory
  | 'redis' // quota.backend: redis, answered in time
  | 'local' // redis did not answer; this process's own counts (on_backend_error: local)
  | 'allow' // redis did not answer; let through uncounted (on_backend_error: allow)
  | 'deny'; // redis did not answer; refused (on_backend_error: deny)

/**
 * What admission holds for an admitted request until its end. Both calls are safe to repeat (only the
 * first counts) and never throw; they do their store work in the background.
 */
export interface QuotaLease {
  /**
   * The answer's real usage: tokens_per_minute is corrected by (prompt + completion − the prompt estimate
   * charged at admission). Without it (no usage in the answer, an error, an abort) the estimate stands.
   */
  reconcile(actualPromptTokens: number, completionTokens: number): void;
  /** The request is over (answered, failed or abandoned): its max_concurrent slot is given back. */
  release(): void;
}

/** A store's view of one admission (shared by the memory and Redis stores; levels may be fractional). */
export interface Outcome {
  /** undefined: admitted */
  reason: Exclude<RefusalReason, 'backend'> | undefined;
  /** requests left in the bucket after this admission, and ms until it is full again */
  requests: number;
  resetRequestsMs: number;
  /** tokens left (negative while in debt: a charge past the limit), and ms until full again */
  tokens: number;
  resetTokensMs: number;
  /** refused: ms until the binding limit would let this request in */
  waitMs: number;
}

/** The answer of admission: everything the response headers, a refusal and the request's end need. */
export interface QuotaDecision {
  allowed: boolean;
  tenant: string;
  limits: TenantLimits;
  source: DecisionSource;
  /** whole requests left and ms until the requests bucket is full (present when requests_per_minute is set and counted) */
  remainingRequests?: number;
  resetRequestsMs?: number;
  /** whole tokens left and ms until the tokens bucket is full (present when tokens_per_minute is set and counted) */
  remainingTokens?: number;
  resetTokensMs?: number;
  /** refused: which limit, and the seconds for Retry-After */
  reason?: RefusalReason;
  retryAfterS?: number;
  /** release() it when the request ends, admitted or not (a refused decision's lease does nothing) */
  lease: QuotaLease;
}

export const NO_LEASE: QuotaLease = Object.freeze({
  reconcile(): void {},
  release(): void {},
});
