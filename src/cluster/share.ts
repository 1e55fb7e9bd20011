/**
 * Routing knowledge shared between gateway replicas through Redis pub/sub (cluster.backend: redis).
 *
 * Each pick this gateway learns into its prefix index (Router onLearn) is queued; once per event-loop turn
 * (setImmediate) the queue is sent as one binary batch (codec.ts) on cluster.channel. Every batch another
 * replica sends is applied to this gateway's own index (Router.learnRemote), so a conversation whose
 * turns arrive at different replicas still lands where its prefix is cached.
 *
 * Never on a request's path: learned() only copies the hashes into the queue. While Redis is away (either
 * connection not ready) picks are dropped and counted, the gateway routes on its own knowledge, the
 * infergate_cluster_connected gauge reads 0 and a warning is logged at most once a minute; ioredis
 * reconnects by itself (every 50 ms to 1 s) and resubscribes, and sharing resumes. What was learned while
 * Redis was away is not sent later (stale knowledge is worth little; the index relearns from traffic).
 *
 * Bounds (batcher.ts, shared with the IPC share): a batch holds at most MAX_RECORDS picks and
 * MAX_BATCH_HASHES hashes (more in one turn are dropped); at most MAX_OUTSTANDING publishes wait for Redis's
 * answer at once (past that Redis is behind and the batch is dropped); each publish times out after
 * PUBLISH_TIMEOUT_MS.
 */
import { Redis } from 'ioredis';
import { PickBatcher, type Direction, type Result } from './batcher.js';
import type { StoredAnswer } from './codec.js';

export { MAX_BATCH_HASHES, MAX_OUTSTANDING, type Direction, type Result } from './batcher.js';
export const PUBLISH_TIMEOUT_MS = 1000;
/** the Redis-away warning is logged at most this often */
const DOWN_LOG_INTERVAL_MS = 60_000;

export interface ClusterOptions {
  url: string;
  channel: string;
}

export interface ClusterHooks {
  /** what another replica learned: apply it to this gateway's index */
  apply(pool: string, endpoint: string, hashes: Uint32Array): void;
  /** a stored answer another replica relayed: remember where it is kept (the Responses API's retrieve) */
  remember?(a: StoredAnswer): void;
  /** counts of learned picks and stored answers (records), by direction and result */
  count(direction: Direction, result: Result, n: number): void;
  connected(up: boolean): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

export class ClusterShare {
  private readonly pub: Redis;
  private readonly sub: Redis;
  /** batches of learned picks; this process's own come back from the channel and are skipped there */
  private readonly batcher: PickBatcher;
  private up = false;
  private subscribed = false;
  private lastDownLog = 0;
  private downLogged = false;
  private closed = false;

  constructor(
    private readonly opts: ClusterOptions,
    private readonly hooks: ClusterHooks,
  ) {
    this.batcher = new PickBatcher(
      {
        ready: () => this.connected,
        send: (bytes, done) => {
          this.pub.publish(opts.channel, bytes).then(
            () => done(null),
            (err: Error) => done(err),
          );
        },
        trouble: (err) => this.check(err),
      },
      (direction, result, n) => hooks.count(direction, result, n),
    );
    const common = {
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      retryStrategy: (times: number) => Math.min(50 * times, 1000),
      lazyConnect: false,
    };
    this.pub = new Redis(opts.url, { ...common, enableOfflineQueue: false, commandTimeout: PUBLISH_TIMEOUT_MS });
    // subscribed anew on each (re)connection, and counted as connected only once Redis confirmed it
    this.sub = new Redis(opts.url, { ...common, enableOfflineQueue: false, autoResubscribe: false });
    this.sub.on('ready', () => {
      this.sub.subscribe(opts.channel).then(
        () => {
          this.subscribed = true;
          this.check();
        },
        (err: Error) => this.check(err),
      );
    });
    this.sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.batcher.received(message, (p, e, h) => hooks.apply(p, e, h), hooks.remember && ((a) => hooks.remember!(a))));
    this.pub.on('ready', () => this.check());
    for (const c of [this.pub, this.sub]) {
      c.on('close', () => {
        if (c === this.sub) this.subscribed = false;
        this.check(new Error('connection to Redis closed'));
      });
      // each failed (re)connection is reported here; without a listener ioredis would print it itself
      c.on('error', (err: Error) => this.check(err));
    }
  }

  /** Both connections ready and the channel subscribed: picks are being shared. */
  get connected(): boolean {
    return this.subscribed && this.pub.status === 'ready' && this.sub.status === 'ready';
  }

  /** A pick this gateway learned (Router onLearn): batched (batcher.ts). Never throws, never waits. */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void {
    if (!this.closed) this.batcher.learned(pool, endpoint, chain, totalBlocks);
  }

  /** A stored answer this gateway relayed: batched with the turn's others. Never throws. */
  answered(a: StoredAnswer): void {
    if (!this.closed) this.batcher.answered(a);
  }

  /** Re-reads the connections' state: the gauge, and the log lines (down at most once a minute; back once). */
  private check(err?: Error): void {
    if (this.closed) return;
    const now = this.connected;
    if (now !== this.up) {
      this.up = now;
      this.hooks.connected(now);
      if (now && this.downLogged) {
        this.downLogged = false;
        this.hooks.info({ backend: 'redis', channel: this.opts.channel }, 'cluster: Redis answers again, routing knowledge is shared again');
      }
    }
    if (!now && err !== undefined) {
      const t = Date.now();
      if (t - this.lastDownLog >= DOWN_LOG_INTERVAL_MS) {
        this.lastDownLog = t;
        this.downLogged = true;
        this.hooks.warn(
          { backend: 'redis', err: err.message },
          'cluster: Redis unavailable, routing on this gateway\'s own knowledge (logged at most once a minute while it lasts)',
        );
      }
    }
  }

  close(): void {
    this.closed = true;
    this.batcher.close();
    this.pub.disconnect();
    this.sub.disconnect();
  }
}
