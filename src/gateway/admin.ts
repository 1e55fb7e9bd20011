/** The admin listener's routes: health, readiness, the router's state, and the Prometheus metrics. */
import type { Logger } from '../observability/logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Router } from '../routing/index.js';
import { errors } from '../openai/errors.js';
import { errorAnswer, jsonAnswer } from './answers.js';
import type { Answer } from './client.js';
import type { Front } from './uws-front.js';

/** What the admin routes read of the running gateway. */
export interface AdminView {
  readonly router: Router;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly draining: boolean;
}

export function adminRoutes(front: Front, gw: AdminView): void {
  front.get('/healthz', () => jsonAnswer('200 OK', '{"status":"ok"}'));
  front.get('/readyz', () => {
    const empty = gw.router.pools().filter((p) => gw.router.endpoints(p).length === 0);
    if (gw.draining) return jsonAnswer('503 Service Unavailable', '{"status":"draining"}');
    if (empty.length > 0) return jsonAnswer('503 Service Unavailable', JSON.stringify({ status: 'not ready', pools_without_endpoints: empty }));
    return jsonAnswer('200 OK', '{"status":"ready"}');
  });
  front.get('/debug/pools', (head) => jsonAnswer('200 OK', head ? '' : JSON.stringify(gw.router.debugPools(Date.now()), null, 2)));
  const contentType = gw.metrics.registry.contentType;
  front.get('/metrics', (head): Answer | Promise<Answer> => {
    if (head) return { status: '200 OK', contentType };
    return gw.metrics.registry.metrics().then(
      (text) => ({ status: '200 OK', contentType, body: text }),
      (err: unknown) => {
        gw.logger.error({ err }, 'metrics collection failed');
        return { status: '500 Internal Server Error' };
      },
    );
  });
  front.fallback((method, url) => errorAnswer(errors.routeNotFound(method, url)));
}
