/** What every exchange needs from the running gateway; kept small so the hot path's dependencies are plain. */
import type { Config } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Router } from '../routing/index.js';
import type { DecisionRing } from './decisions.js';
import type { Upstreams } from './upstreams.js';
import type { ClientSide } from './client.js';
import type { Admission } from './admission.js';
import type { Quota } from '../quota/index.js';
import type { RetryBudgets } from './retry.js';
import type { Cors } from './cors.js';
import type { Tracing } from '../observability/tracing.js';
import type { FlowControl } from './flow.js';
import type { ResponseAffinity } from './response-affinity.js';
import type { BodyBudget } from './body.js';

export interface GatewayContext {
  config: Config;
  router: Router;
  upstreams: Upstreams;
  metrics: GatewayMetrics;
  logger: Logger;
  /** each request's span: ids for traceparent and the access line, exported with tracing.otlp_endpoint */
  tracing: Tracing;
  /** Lower-cased header names that pin a session to one alias target (`models[].sticky.header`). */
  stickyHeaders: ReadonlySet<string>;
  /** authentication, the token's models, and the checks before a request is sent */
  admission: Admission;
  /** tenant quotas (src/quota/): admission's last step, and the usage charged when an answer ends */
  readonly quota: Quota;
  /** flow control: priority classes and each pool's wait queue (flow.ts) */
  readonly flow: FlowControl;
  /** pool → the key sent upstream as `Authorization: Bearer` (api_key_file / api_key_env) */
  poolKeys: ReadonlyMap<string, string>;
  /** whether a peer address is in trusted_proxies (its X-Forwarded-* are believed) */
  isTrustedProxy(peer: string): boolean;
  /** cross-origin access (the `cors` section), undefined when off */
  readonly cors: Cors | undefined;
  /** the client listener's scheme, for X-Forwarded-Proto */
  scheme: 'http' | 'https';
  draining: boolean;
  /** the last routing decisions (admin.decisions > 0), fed by every pick */
  readonly decisions: DecisionRing | null;
  inFlight: number;
  /** Responses API answer ids → the endpoint that served them, for previous_response_id (response-affinity.ts) */
  readonly responseAffinity: ResponseAffinity;
  /** each pool's retries in progress against its retry_budget (retry.ts) */
  readonly retryBudgets: RetryBudgets;
  /**
   * limits.max_buffered_body_bytes: the bytes request bodies hold, those being received (the front's) and
   * those held by requests in flight (an exchange's, from its body's arrival until it ends: undici keeps a
   * body until its answer is over, and a retry sends it again)
   */
  readonly bodies: BodyBudget;
  /** an exchange is over (its client's connection no longer counts) */
  onExchangeDone(ex: { readonly client: ClientSide }): void;
}
