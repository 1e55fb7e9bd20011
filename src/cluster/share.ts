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
 * Bounds: a batch holds at most MAX_RECORDS picks and MAX_BATCH_HASHES hashes (more in one turn are
 * dropped); at most MAX_OUTSTANDING
 * publishes wait for Redis's answer at once (past that Redis is behind and the batch is dropped); each
 * publish times out after PUBLISH_TIMEOUT_MS.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { decode, encode, MAX_HASHES, MAX_RECORDS, nameFits, SENDER_BYTES, type Learned } from './codec.js';

/** publishes sent and not yet answered, at most */
export const MAX_OUTSTANDING = 32;
export const PUBLISH_TIMEOUT_MS = 1000;
/** hashes a batch holds in all, at most (1 MiB of them): a turn that learned more drops the rest */
export const MAX_BATCH_HASHES = 262_144;
/** the Redis-away warning is logged at most this often */
const DOWN_LOG_INTERVAL_MS = 60_000;

export interface ClusterOptions {
  url: string;
  channel: string;
}

export type Direction = 'sent' | 'received';
/** ok: sent or applied; dropped: not sent (Redis away or behind, batch full); invalid: a malformed message; error: the publish failed */
export type Result = 'ok' | 'dropped' | 'invalid' | 'error';

export interface ClusterHooks {
  /** what another replica learned: apply it to this gateway's index */
  apply(pool: string, endpoint: string, hashes: Uint32Array): void;
  /** counts of learned picks (records), by direction and result */
  count(direction: Direction, result: Result, n: number): void;
  connected(up: boolean): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

export class ClusterShare {
  private readonly pub: Redis;
  private readonly sub: Redis;
  /** this process's id in every batch it sends (its own batches come back from the channel: skipped) */
  private readonly sender = randomBytes(SENDER_BYTES);
  private queue: Learned[] = [];
  private queuedHashes = 0;
  private flushScheduled = false;
  private outstanding = 0;
  private up = false;
  private subscribed = false;
  private lastDownLog = 0;
  private downLogged = false;
  private closed = false;

  constructor(
    private readonly opts: ClusterOptions,
    private readonly hooks: ClusterHooks,
  ) {
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
    this.sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.received(message));
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

  /**
   * A pick this gateway learned (Router onLearn). `chain` is the router's reused buffer: its first
   * `totalBlocks` entries are copied. Never throws, never waits.
   */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void {
    if (this.closed) return;
    const n = Math.min(totalBlocks, chain.length, MAX_HASHES);
    if (n <= 0) return;
    if (
      !this.connected ||
      this.queue.length >= MAX_RECORDS ||
      this.queuedHashes + n > MAX_BATCH_HASHES ||
      !nameFits(pool) ||
      !nameFits(endpoint)
    ) {
      this.hooks.count('sent', 'dropped', 1);
      return;
    }
    const hashes = new Uint32Array(n);
    for (let i = 0; i < n; i++) hashes[i] = chain[i] >>> 0;
    this.queue.push({ pool, endpoint, hashes });
    this.queuedHashes += n;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    this.queuedHashes = 0;
    if (batch.length === 0) return;
    if (!this.connected || this.outstanding >= MAX_OUTSTANDING) {
      this.hooks.count('sent', 'dropped', batch.length);
      return;
    }
    let bytes: Buffer;
    try {
      bytes = encode(this.sender, batch);
    } catch {
      this.hooks.count('sent', 'dropped', batch.length);
      return;
    }
    this.outstanding++;
    this.pub.publish(this.opts.channel, bytes).then(
      () => {
        this.outstanding--;
        this.hooks.count('sent', 'ok', batch.length);
      },
      (err: Error) => {
        this.outstanding--;
        this.hooks.count('sent', 'error', batch.length);
        this.check(err);
      },
    );
  }

  private received(message: Buffer): void {
    let batch;
    try {
      batch = decode(message);
    } catch {
      this.hooks.count('received', 'invalid', 1);
      return;
    }
    if (batch.sender.equals(this.sender)) return; // our own, back from the channel
    for (const r of batch.records) {
      try {
        this.hooks.apply(r.pool, r.endpoint, r.hashes);
      } catch {
        this.hooks.count('received', 'invalid', 1);
        continue;
      }
      this.hooks.count('received', 'ok', 1);
    }
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
    this.queue = [];
    this.pub.disconnect();
    this.sub.disconnect();
  }
}
