/**
 * The admin listener's routes: the status page (`/`), health, readiness, the router's state, the last
 * routing decisions, and the Prometheus metrics. It stays up while the gateway drains, until the process
 * exits (/readyz then answers 503 `draining`).
 */
import type { Config } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { Router } from '../routing/index.js';
import { errors } from '../openai/errors.js';
import { errorAnswer, jsonAnswer } from './answers.js';
import type { Answer } from './client.js';
import { decisionJson } from './decisions.js';
import { STATUS_PAGE } from './status-page/page.js';
import { gatewayState, type StateSource } from './status-page/state.js';
import type { Front } from './uws-front.js';

/** What the admin routes read of the running gateway. */
export interface AdminView extends StateSource {
  readonly config: Config;
  readonly router: Router;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
}

/** /debug/decisions without `n` */
const DEFAULT_DECISIONS = 50;

export function adminRoutes(front: Front, gw: AdminView): void {
  front.get('/', () => ({ status: '200 OK', contentType: 'text/html; charset=utf-8', body: STATUS_PAGE }));
  front.get('/healthz', () => jsonAnswer('200 OK', '{"status":"ok"}'));
  front.get('/readyz', () => {
    if (gw.draining) return jsonAnswer('503 Service Unavailable', JSON.stringify({ status: 'draining', in_flight: gw.inFlight }));
    const r = gw.readiness(Date.now());
    if (r.ready) return jsonAnswer('200 OK', JSON.stringify({ status: 'ready', ready_when: r.ready_when }));
    const missing = r.models.filter((m) => !m.ready).map((m) => ({ model: m.model, missing: m.missing }));
    return jsonAnswer('503 Service Unavailable', JSON.stringify({ status: 'not ready', ready_when: r.ready_when, models_not_ready: missing }));
  });
  // HEAD answers are built as GET's are (the front sends no body): their Content-Length is the GET body's
  // (on uWS 20.57; 20.30 sends none), as on every other route
  front.get('/debug/pools', () => jsonAnswer('200 OK', JSON.stringify(gw.router.debugPools(Date.now()), null, 2)));
  front.get('/debug/state', () => jsonAnswer('200 OK', JSON.stringify(gatewayState(gw, Date.now()))));
  front.get('/debug/decisions', (_head, query) => {
    const ring = gw.decisions;
    const max = ring?.capacity ?? 0;
    const raw = new URLSearchParams(query).get('n');
    const n = raw === null ? Math.min(DEFAULT_DECISIONS, max) : /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
    if (!(n >= 0 && n <= max)) {
      return errorAnswer(errors.invalidField('n', `n must be a whole number from 0 to ${max} (admin.decisions).`));
    }
    const list = ring?.last(n) ?? [];
    return jsonAnswer('200 OK', JSON.stringify({ capacity: max, count: list.length, decisions: list.map(decisionJson) }, null, 1));
  });
  const contentType = gw.metrics.registry.contentType;
  front.get('/metrics', (): Answer | Promise<Answer> => {
    return gw.metrics.registry.metrics().then(
      (text) => ({ status: '200 OK', contentType, body: text }),
      (err: unknown) => {
        gw.logger.error({ err }, 'metrics collection failed');
        return { status: '500 Internal Server Error' };
      },
    );
  });
  front.fallback((method, url, allow) =>
    errorAnswer(allow !== undefined ? errors.methodNotAllowed(method, url) : errors.routeNotFound(method, url)),
  );
}
