/**
 * When a failed try may be sent again to another endpoint, and how many retries a pool may have in
 * progress at once.
 *
 * A retry is safe only when the failure proves the model server did not take the request (otherwise the
 * first pod may still be generating, and a second one doubles the work and likely times out too):
 * - `connect`: no connection was made (refused, unreachable, a DNS failure, the connect timeout);
 * - `reset`: the connection was closed or reset before any byte of an answer (a server that dies or drops
 *   the connection is not generating for it: vLLM aborts a request whose client is gone);
 * - `status`: the server answered 502 or 503 before any body byte (vLLM and the proxies in front of it say
 *   so when they are overloaded or not ready: the request was refused, not run).
 * A timeout after the request was sent (first byte, idle stream, the whole non-streamed answer) is never
 * retried: the try is cancelled and the client gets 504.
 *
 * The budget is Envoy's retry budget: retries in progress at once ≤ max(min_retry_concurrency,
 * budget_percent × the pool's requests in progress). A retry refused by it fails at once with the try's own
 * failure, so a failing pool sees at most that extra load.
 */
import type { PoolConfig } from '../config/schema.js';

export type RetryReason = 'connect' | 'reset' | 'status';

/** Error codes of a connection that was never made (Node's, undici's). */
const CONNECT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Error codes of a connection closed or reset under a request. */
const RESET_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/**
 * Why an upstream error before any answer byte may be retried, or null when it may not (timeouts, and
 * anything that is not plainly a connection failure).
 */
export function retryReasonOf(err: Error): RetryReason | null {
  const code = (err as { code?: string }).code ?? '';
  if (CONNECT_CODES.has(code)) return 'connect';
  if (RESET_CODES.has(code)) return 'reset';
  return null;
}

/** Statuses another endpoint may answer better (before any body byte): the request goes there. */
export function retryableStatus(status: number): boolean {
  return status === 502 || status === 503;
}

/** One pool's requests and retries in progress. */
export class RetryBudget {
  /** requests of the pool from their first try to their end */
  active = 0;
  /** of those, the ones whose current try is a retry */
  activeRetries = 0;

  /** How many retries may be in progress at once now. */
  limit(cfg: PoolConfig['retry_budget']): number {
    return Math.max(cfg.min_retry_concurrency, Math.floor((this.active * cfg.budget_percent) / 100 + 1e-9));
  }

  /** Whether one more retry fits (the caller then counts it in activeRetries). */
  allows(cfg: PoolConfig['retry_budget']): boolean {
    return this.activeRetries < this.limit(cfg);
  }
}

/** The budgets of every pool, made on first use (a pool added by a reload gets one then). */
export class RetryBudgets {
  private readonly pools = new Map<string, RetryBudget>();

  of(pool: string): RetryBudget {
    let b = this.pools.get(pool);
    if (b === undefined) {
      b = new RetryBudget();
      this.pools.set(pool, b);
    }
    return b;
  }
}
