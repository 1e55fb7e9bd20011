/** The end of an exchange as the operator sees it: the request metrics and the access-log line. */
import type { GatewayContext } from './context.js';

/** What an exchange knows at its end (empty strings and zeros for what it never got to). */
export interface ExchangeRecord {
  readonly requestId: string;
  /** the model as the client named it */
  readonly modelLabel: string;
  readonly pool: string;
  readonly endpoint: string;
  readonly attempts: number;
  /** the token's tenant ('' with auth off or before verification) */
  readonly tenant: string;
  readonly promptTokens: number;
  /** performance.now() at the start and at the first response byte (0: none) */
  readonly started: number;
  readonly firstByteAt: number;
  /** who ended it before its end: the client leaving (logged 499) or the gateway (a client too slow) */
  readonly closedBy?: 'client' | 'gateway';
  /** its flow-control class once decided (at admission), and how long it waited in its pool's queue (0: it did not) */
  readonly priorityClass?: string;
  readonly queuedMs?: number;
}

export function recordExchange(ctx: GatewayContext, ex: ExchangeRecord, status: number): void {
  const seconds = (performance.now() - ex.started) / 1000;
  ctx.metrics.requestDone(ex.pool ? ex.modelLabel : '', ex.pool, status, seconds);
  if (ex.endpoint) ctx.metrics.endpointDone(ex.pool, ex.endpoint, status, ex.firstByteAt ? (ex.firstByteAt - ex.started) / 1000 : null);
  if (ctx.config.logging.access_log && ctx.logger.isLevelEnabled('info')) {
    ctx.logger.info(
      {
        req_id: ex.requestId, tenant: ex.tenant || undefined, model: ex.modelLabel || undefined, pool: ex.pool || undefined,
        endpoint: ex.endpoint || undefined, status, attempts: ex.attempts,
        prompt_tokens_est: ex.promptTokens || undefined,
        ttft_ms: ex.firstByteAt ? Math.round((ex.firstByteAt - ex.started) * 10) / 10 : undefined,
        duration_ms: Math.round(seconds * 10000) / 10,
        closed_by: ex.closedBy,
        priority: ex.priorityClass,
        queued_ms: ex.queuedMs ? Math.round(ex.queuedMs * 10) / 10 : undefined,
      },
      'request',
    );
  }
}
