/** What every exchange needs from the running gateway; kept small so the hot path's dependencies are plain. */
import type { Config } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Router } from '../routing/index.js';
import type { Upstreams } from './upstreams.js';
import type { ClientSide } from './client.js';

export interface GatewayContext {
  config: Config;
  router: Router;
  upstreams: Upstreams;
  metrics: GatewayMetrics;
  logger: Logger;
  /** Lower-cased header names that pin a session to one alias target (`models[].sticky.header`). */
  stickyHeaders: ReadonlySet<string>;
  draining: boolean;
  inFlight: number;
  /** an exchange is over (its client's connection no longer counts) */
  onExchangeDone(ex: { readonly client: ClientSide }): void;
}
