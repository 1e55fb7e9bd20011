/**
 * Routing knowledge shared between the workers of `infergate serve --workers N` over the IPC channel to
 * their parent, when no `cluster` backend is configured (with `cluster.backend: redis` the workers use
 * Redis like any replica, share.ts).
 *
 * The same shape as the Redis share: each pick this worker learns (Router onLearn) is queued, and once per
 * event-loop turn (setImmediate) the queue goes to the parent as one batch in the codec's wire form. The
 * parent (gateway/workers.ts) relays each batch to every other worker, which applies it to its own index
 * (Router.learnRemote). A worker never gets its own batches back.
 *
 * Never on a request's path: learned() only copies the hashes. At most MAX_OUTSTANDING batches wait for
 * the channel to take them (past that the parent is behind: the batch is dropped and counted); a closed
 * channel (the parent gone) drops everything.
 */
import { randomBytes } from 'node:crypto';
import { decode, encode, MAX_HASHES, MAX_RECORDS, nameFits, SENDER_BYTES, type Learned } from './codec.js';
import { MAX_BATCH_HASHES, type ClusterHooks } from './share.js';

/** batches handed to the channel and not yet written, at most */
export const MAX_OUTSTANDING = 32;

/** What a worker and its parent say to each other about learned picks. */
export interface LearnMessage {
  t: 'learn';
  /** a batch in codec.ts's wire form */
  b: Uint8Array;
}

export function isLearnMessage(m: unknown): m is LearnMessage {
  return typeof m === 'object' && m !== null && (m as { t?: unknown }).t === 'learn' && (m as { b?: unknown }).b instanceof Uint8Array;
}

/** The IPC side a worker has: its process, when it was forked with an IPC channel. */
export interface Channel {
  send?(message: unknown, callback?: (err: Error | null) => void): boolean;
  readonly connected?: boolean;
  on(event: 'message', listener: (m: unknown) => void): unknown;
  off(event: 'message', listener: (m: unknown) => void): unknown;
}

export class IpcShare {
  private readonly sender = randomBytes(SENDER_BYTES);
  private queue: Learned[] = [];
  private queuedHashes = 0;
  private flushScheduled = false;
  private outstanding = 0;
  private closed = false;
  private readonly onMessage = (m: unknown): void => {
    if (isLearnMessage(m)) this.received(m.b);
  };

  constructor(
    private readonly channel: Channel,
    private readonly hooks: Pick<ClusterHooks, 'apply' | 'count' | 'connected'>,
  ) {
    channel.on('message', this.onMessage);
    hooks.connected(this.connected);
  }

  get connected(): boolean {
    return !this.closed && this.channel.connected === true && this.channel.send !== undefined;
  }

  /** A pick this worker learned (Router onLearn); `chain`'s first `totalBlocks` entries are copied. Never throws. */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void {
    if (this.closed) return;
    const n = Math.min(totalBlocks, chain.length, MAX_HASHES);
    if (n <= 0) return;
    if (!this.connected || this.queue.length >= MAX_RECORDS || this.queuedHashes + n > MAX_BATCH_HASHES || !nameFits(pool) || !nameFits(endpoint)) {
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
    if (batch.length === 0 || this.closed) return;
    if (!this.connected || this.outstanding >= MAX_OUTSTANDING) {
      this.hooks.count('sent', 'dropped', batch.length);
      this.hooks.connected(this.connected);
      return;
    }
    const message: LearnMessage = { t: 'learn', b: encode(this.sender, batch) };
    this.outstanding++;
    try {
      this.channel.send!(message, (err) => {
        this.outstanding--;
        this.hooks.count('sent', err ? 'error' : 'ok', batch.length);
      });
    } catch {
      // the channel closed between the check and the send
      this.outstanding--;
      this.hooks.count('sent', 'error', batch.length);
      this.hooks.connected(this.connected);
    }
  }

  private received(bytes: Uint8Array): void {
    let batch;
    try {
      batch = decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch {
      this.hooks.count('received', 'invalid', 1);
      return;
    }
    if (batch.sender.equals(this.sender)) return;
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

  close(): void {
    this.closed = true;
    this.queue = [];
    this.channel.off('message', this.onMessage);
  }
}
