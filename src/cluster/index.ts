/**
 * Replicas that route as one (the `cluster` config section): what each gateway learns about where
 * prompts' prefixes are cached is shared with the others (share.ts, through Redis), applied to each one's
 * own prefix index. The workers of `serve --workers N` without a configured backend share the same way
 * over IPC through their parent (ipc.ts). startCluster wires a share to a router, the gateway's metrics
 * and its logger.
 */
import client from 'prom-client';
import type { ClusterConfig } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import { ClusterShare } from './share.js';
import { IpcShare, type Channel } from './ipc.js';
import type { StoredAnswer } from './codec.js';

export { ClusterShare } from './share.js';
export { IpcShare } from './ipc.js';
export * as codec from './codec.js';

/** What the cluster needs of the router (Router.learnRemote). */
export interface RemoteLearner {
  learnRemote(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number, now: number): void;
}

/** What the gateway needs of a share, whichever the backend (Redis or IPC). */
export interface RoutingShare {
  /** a pick this gateway learned (Router onLearn); never throws, never waits */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void;
  /** an answer this gateway relayed and its server stored (the Responses API); never throws, never waits */
  answered(a: StoredAnswer): void;
  close(): void;
}

/**
 * The share for `config`, its metrics registered in `registry`: Redis with backend redis; with backend
 * none, IPC through the parent when `opts.ipc` (a worker of `serve --workers N` forked with an IPC
 * channel), else none.
 */
export function startCluster(
  config: ClusterConfig,
  router: RemoteLearner,
  registry: client.Registry,
  logger: Logger,
  opts: { ipc?: boolean; channel?: Channel; remember?: (a: StoredAnswer) => void } = {},
): RoutingShare | undefined {
  const redis = config.backend === 'redis' && config.url !== undefined;
  const channel = opts.channel ?? (process as Channel);
  if (!redis && !(opts.ipc && channel.send !== undefined)) return undefined;
  const registers = [registry];
  const connected = new client.Gauge({
    name: 'infergate_cluster_connected',
    help: 'Whether this gateway shares routing knowledge with its replicas through the cluster backend: 1 yes, 0 no (it routes on its own knowledge meanwhile).',
    registers,
  });
  connected.set(0);
  const messages = new client.Counter<'direction' | 'result'>({
    name: 'infergate_cluster_messages_total',
    help: 'Learned picks and stored answers (Responses API ids) shared with the replicas or sibling workers (sent) and from them (received), by result: ok, dropped (the backend away or behind), invalid (malformed), error (publish failed).',
    labelNames: ['direction', 'result'],
    registers,
  });
  for (const d of ['sent', 'received'] as const) messages.inc({ direction: d, result: 'ok' }, 0);
  const apply = (pool: string, endpoint: string, hashes: Uint32Array) => router.learnRemote(pool, endpoint, hashes, hashes.length, Date.now());
  if (!redis || config.url === undefined) {
    return new IpcShare(channel, {
      apply,
      remember: opts.remember,
      count: (direction, result, n) => messages.inc({ direction, result }, n),
      connected: (up) => connected.set(up ? 1 : 0),
    });
  }
  return new ClusterShare(
    { url: config.url, channel: config.channel },
    {
      apply,
      remember: opts.remember,
      count: (direction, result, n) => messages.inc({ direction, result }, n),
      connected: (up) => connected.set(up ? 1 : 0),
      warn: (fields, msg) => logger.warn(fields, msg),
      info: (fields, msg) => logger.info(fields, msg),
    },
  );
}
