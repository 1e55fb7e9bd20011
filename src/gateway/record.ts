/**
 * The end of a request as the operator sees it: the request metrics, the access-log line and the request's
 * span. Every client request gets one access line, whoever answered it: an exchange (the POST routes) at
 * its end, the front for what it answers itself (GET routes, unknown paths and methods, heads over the
 * limit, connections over the bound). The line is built once, at the end; nothing is done per chunk.
 * Field names are stable (README.md, "Access log").
 */
import type { Usage } from '../openai/usage.js';
import type { PickExplain } from '../routing/index.js';
import type { RequestSpan, SpanAttributes } from '../observability/tracing.js';
import type { GatewayContext } from './context.js';

/** A path longer than this is logged cut (with "…"): a client chooses it. */
const MAX_LOGGED_PATH = 512;

/** What an exchange knows at its end (empty strings and zeros for what it never got to). */
export interface ExchangeRecord {
  readonly requestId: string;
  readonly method: string;
  readonly path: string;
  /** the peer's address, and the client's X-Forwarded-For when the peer is a trusted proxy */
  readonly peer: string;
  readonly forwardedFor: string | undefined;
  /** the model as the client named it, and as it was sent upstream (an alias resolved) */
  readonly modelLabel: string;
  readonly forwardModel: string;
  readonly pool: string;
  readonly policy: string;
  readonly endpoint: string;
  readonly attempts: number;
  /** the token's tenant ('' with auth off or before verification) */
  readonly tenant: string;
  /** the prompt's token estimate, and the answer's usage when it had one */
  readonly promptTokens: number;
  readonly usage: Usage | null;
  /** the last pick's explanation (when explained: admin.decisions > 0 or debug level) */
  readonly picked: PickExplain | undefined;
  /** the error answered (its stable code) and, for a refusal by the gateway, why */
  readonly errorCode: string | undefined;
  readonly rejectReason: string | undefined;
  readonly span: RequestSpan;
  /** performance.now() at the start and at the first response byte (0: none) */
  readonly started: number;
  readonly firstByteAt: number;
  /** who ended it before its end: the client leaving (logged 499) or the gateway (a client too slow) */
  readonly closedBy?: 'client' | 'gateway';
  /** why the last failed try to a model server failed (exchanges only) */
  readonly upstreamError?: string;
  /** its flow-control class once decided (at admission), and how long it waited in its pool's queue (0: it did not) */
  readonly priorityClass?: string;
  readonly queuedMs?: number;
}

/** The winner's total score, the runner-up's, and the share of the prompt's prefix blocks the winner held. */
export function pickFigures(explain: PickExplain | undefined, endpoint: string): { score?: number; runnerUp?: number; prefixMatch?: number } {
  if (explain === undefined || endpoint === '') return {};
  let score: number | undefined;
  let runnerUp: number | undefined;
  let matched = 0;
  for (const c of explain.candidates) {
    if (c.endpoint === endpoint) {
      score = c.total;
      matched = c.matchedBlocks;
    } else if (runnerUp === undefined || c.total > runnerUp) runnerUp = c.total;
  }
  if (score === undefined) return {};
  return {
    score: round4(score),
    runnerUp: runnerUp === undefined ? undefined : round4(runnerUp),
    prefixMatch: explain.totalBlocks > 0 ? round4(matched / explain.totalBlocks) : undefined,
  };
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

function ms(x: number): number {
  return Math.round(x * 10) / 10;
}

export function loggedPath(path: string): string {
  return path.length > MAX_LOGGED_PATH ? `${path.slice(0, MAX_LOGGED_PATH)}…` : path;
}

export function recordExchange(ctx: GatewayContext, ex: ExchangeRecord, status: number): void {
  const now = performance.now();
  const seconds = (now - ex.started) / 1000;
  const model = ex.pool ? ex.modelLabel : '';
  ctx.metrics.requestDone(model, ex.pool, status, seconds);
  if (ex.endpoint) ctx.metrics.endpointDone(ex.pool, ex.endpoint, status, ex.firstByteAt ? (ex.firstByteAt - ex.started) / 1000 : null);
  const usage = ex.usage;
  if (usage && ex.pool) {
    ctx.metrics.tokensUsed(model, ex.pool, usage.promptTokens, usage.completionTokens);
    if (usage.audioSeconds !== undefined) ctx.metrics.audioSeconds.inc({ model, pool: ex.pool }, usage.audioSeconds);
  }
  const log = ctx.config.logging.access_log && ctx.logger.isLevelEnabled('info');
  const span = ctx.tracing.exporting;
  if (!log && !span) return;
  const { score, runnerUp, prefixMatch } = pickFigures(ex.picked, ex.endpoint);
  const ttft = ex.firstByteAt ? ms(ex.firstByteAt - ex.started) : undefined;
  const retries = ex.attempts > 1 ? ex.attempts - 1 : 0;
  const target = ex.forwardModel && ex.forwardModel !== ex.modelLabel ? ex.forwardModel : undefined;
  if (log) {
    ctx.logger.info(
      {
        req_id: ex.requestId, method: ex.method, path: loggedPath(ex.path), client: ex.peer || undefined, xff: ex.forwardedFor,
        tenant: ex.tenant || undefined, model: ex.modelLabel || undefined, target, pool: ex.pool || undefined,
        endpoint: ex.endpoint || undefined, policy: ex.policy || undefined, score, runner_up: runnerUp, prefix_match: prefixMatch,
        status, code: ex.errorCode, reject_reason: ex.rejectReason,
        ttft_ms: ttft, duration_ms: ms(seconds * 1000),
        prompt_tokens: usage?.promptTokens, completion_tokens: usage?.completionTokens, audio_seconds: usage?.audioSeconds,
        prompt_tokens_est: ex.promptTokens || undefined,
        attempts: ex.attempts, retries,
        trace_id: ex.span.traceId, span_id: ex.span.spanId,
        closed_by: ex.closedBy,
        upstream_error: ex.upstreamError,
        priority: ex.priorityClass,
        queued_ms: ex.queuedMs ? Math.round(ex.queuedMs * 10) / 10 : undefined,
      },
      'request',
    );
  }
  if (span) {
    const a: SpanAttributes = {
      'http.request.method': ex.method,
      'url.path': loggedPath(ex.path),
      'http.response.status_code': status,
      'client.address': ex.peer || undefined,
      'infergate.request_id': ex.requestId,
      'infergate.tenant': ex.tenant || undefined,
      'gen_ai.request.model': ex.modelLabel || undefined,
      'infergate.target_model': target,
      'infergate.pool': ex.pool || undefined,
      'infergate.endpoint': ex.endpoint || undefined,
      'infergate.policy': ex.policy || undefined,
      'infergate.score': score,
      'infergate.runner_up_score': runnerUp,
      'infergate.prefix_match': prefixMatch,
      'infergate.attempts': ex.attempts,
      'infergate.retries': retries,
      'infergate.ttft_ms': ttft,
      'gen_ai.usage.input_tokens': usage?.promptTokens,
      'gen_ai.usage.output_tokens': usage?.completionTokens,
      'error.type': ex.errorCode,
      'infergate.reject_reason': ex.rejectReason,
      'infergate.closed_by': ex.closedBy,
      'infergate.upstream_error': ex.upstreamError,
    };
    ex.span.end(a, status >= 500);
  }
}

/** A request the front answered itself (no exchange): its access line. */
export interface FrontRecord {
  requestId: string;
  method: string;
  path: string;
  peer: string;
  forwardedFor: string | undefined;
  status: number;
  code: string | undefined;
  rejectReason: string | undefined;
  traceId: string | undefined;
  started: number;
  closedBy?: 'gateway';
}

export function recordFrontAnswer(ctx: GatewayContext, r: FrontRecord): void {
  if (!ctx.config.logging.access_log || !ctx.logger.isLevelEnabled('info')) return;
  ctx.logger.info(
    {
      req_id: r.requestId, method: r.method, path: loggedPath(r.path), client: r.peer || undefined, xff: r.forwardedFor,
      status: r.status, code: r.code, reject_reason: r.rejectReason,
      duration_ms: ms(performance.now() - r.started),
      trace_id: r.traceId, closed_by: r.closedBy,
    },
    'request',
  );
}
