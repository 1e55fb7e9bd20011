/**
 * Replicas that route as one (the `cluster` config section): what each gateway learns about where
 * prompts' prefixes are cached is shared with the others (share.ts, through Redis), applied to each one's
 * own prefix index. startCluster wires a ClusterShare to a router, the gateway's metrics and its logger.
 */
import client from 'prom-client';
import type { ClusterConfig } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import { ClusterShare } from './share.js';

export { ClusterShare } from './share.js';
export * as codec from './codec.js';

/** What the cluster needs of the router (Router.learnRemote). */
export interface RemoteLearner {
  learnRemote(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number, now: number): void;
}

/** The share for `config` (undefined with backend none), its metrics registered in `registry`. */
export function startCluster(config: ClusterConfig, router: RemoteLearner, registry: client.Registry, logger: Logger): ClusterShare | undefined {
  if (config.backend !== 'redis' || config.url === undefined) return undefined;
  const registers = [registry];
  const connected = new client.Gauge({
    name: 'infergate_cluster_connected',
    help: 'Whether this gateway shares routing knowledge with its replicas through the cluster backend: 1 yes, 0 no (it routes on its own knowledge meanwhile).',
    registers,
  });
  connected.set(0);
  const messages = new client.Counter<'direction' | 'result'>({
    name: 'infergate_cluster_messages_total',
    help: 'Learned picks shared with the replicas (sent) and from them (received), by result: ok, dropped (Redis away or behind), invalid (malformed), error (publish failed).',
    labelNames: ['direction', 'result'],
    registers,
  });
  for (const d of ['sent', 'received'] as const) messages.inc({ direction: d, result: 'ok' }, 0);
  return new ClusterShare(
    { url: config.url, channel: config.channel },
    {
      apply: (pool, endpoint, hashes) => router.learnRemote(pool, endpoint, hashes, hashes.length, Date.now()),
      count: (direction, result, n) => messages.inc({ direction, result }, n),
      connected: (up) => connected.set(up ? 1 : 0),
      warn: (fields, msg) => logger.warn(fields, msg),
      info: (fields, msg) => logger.info(fields, msg),
    },
  );
}
