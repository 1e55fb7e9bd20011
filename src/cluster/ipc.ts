/**
 * Routing knowledge shared between the workers of `infergate serve --workers N` over the IPC channel to
 * their parent, when no `cluster` backend is configured (with `cluster.backend: redis` the workers use
 * Redis like any replica, share.ts).
 *
 * The same shape as the Redis share, with the same batcher (batcher.ts): each pick this worker learns (Router
 * onLearn) is queued, and once per event-loop turn (setImmediate) the queue goes to the parent as one batch
 * in the codec's wire form. The parent (gateway/workers.ts) relays each batch to every other worker, which
 * applies it to its own index (Router.learnRemote). A worker never gets its own batches back.
 *
 * Never on a request's path: learned() only copies the hashes. At most MAX_OUTSTANDING batches wait for
 * the channel to take them (past that the parent is behind: the batch is dropped and counted); a closed
 * channel (the parent gone) drops everything.
 */
import { PickBatcher, type Direction, type Result } from './batcher.js';
import type { StoredAnswer } from './codec.js';

export { MAX_OUTSTANDING } from './batcher.js';

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

/** What the IPC share tells the gateway: what to apply, counts, and whether the channel is open. */
export interface IpcHooks {
  apply(pool: string, endpoint: string, hashes: Uint32Array): void;
  /** a stored answer another worker relayed: remember where it is kept */
  remember?(a: StoredAnswer): void;
  count(direction: Direction, result: Result, n: number): void;
  connected(up: boolean): void;
}

export class IpcShare {
  private readonly batcher: PickBatcher;
  private closed = false;
  private readonly onMessage = (m: unknown): void => {
    if (isLearnMessage(m)) this.batcher.received(Buffer.from(m.b.buffer, m.b.byteOffset, m.b.byteLength), (p, e, h) => this.hooks.apply(p, e, h), this.hooks.remember && ((a) => this.hooks.remember!(a)));
  };

  constructor(
    private readonly channel: Channel,
    private readonly hooks: IpcHooks,
  ) {
    this.batcher = new PickBatcher(
      {
        ready: () => this.connected,
        send: (bytes, done) => {
          const message: LearnMessage = { t: 'learn', b: bytes };
          this.channel.send!(message, (err) => done(err));
        },
        trouble: () => this.hooks.connected(this.connected),
      },
      (direction, result, n) => hooks.count(direction, result, n),
    );
    channel.on('message', this.onMessage);
    hooks.connected(this.connected);
  }

  get connected(): boolean {
    return !this.closed && this.channel.connected === true && this.channel.send !== undefined;
  }

  /** A pick this worker learned (Router onLearn): batched (batcher.ts). Never throws. */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void {
    if (!this.closed) this.batcher.learned(pool, endpoint, chain, totalBlocks);
  }

  /** A stored answer this worker relayed: batched with the turn's others. Never throws. */
  answered(a: StoredAnswer): void {
    if (!this.closed) this.batcher.answered(a);
  }

  close(): void {
    this.closed = true;
    this.batcher.close();
    this.channel.off('message', this.onMessage);
  }
}
