/**
 * The batching both shares use (Redis, share.ts; IPC between workers, ipc.ts): each pick this gateway
 * learns is copied into a queue, and once per event-loop turn (setImmediate) the queue goes out as one
 * batch in the codec's wire form through the share's transport; so do the turn's stored answers (the
 * Responses API's ids: where each answer is kept), as a batch of their own. What arrives is decoded here too: this
 * process's own batches (recognised by the sender id) are skipped, the others' picks applied one by one.
 *
 * Never on a request's path: learned() only copies the hashes. Bounds: a batch holds at most MAX_RECORDS
 * picks and MAX_BATCH_HASHES hashes (more in one turn are dropped); at most MAX_OUTSTANDING batches wait for
 * the transport's answer at once (past that the backend is behind: the batch is dropped). Every pick is
 * counted once: sent ok, dropped (transport away or behind, batch full, a name too long) or error.
 */
import { randomBytes } from 'node:crypto';
import { ANSWERS_VERSION, answerFits, decode, decodeAnswers, encode, encodeAnswers, MAX_HASHES, MAX_RECORDS, nameFits, SENDER_BYTES, type Learned, type StoredAnswer } from './codec.js';

/** batches handed to the transport and not yet answered, at most */
export const MAX_OUTSTANDING = 32;
/** hashes a batch holds in all, at most (1 MiB of them): a turn that learned more drops the rest */
export const MAX_BATCH_HASHES = 262_144;

export type Direction = 'sent' | 'received';
/** ok: sent or applied; dropped: not sent (backend away or behind, batch full); invalid: a malformed message; error: the send failed */
export type Result = 'ok' | 'dropped' | 'invalid' | 'error';

/** Where a batch goes: the Redis channel or the IPC channel to the parent. */
export interface BatchTransport {
  /** whether a batch can go out now */
  ready(): boolean;
  /** Hand one encoded batch over; `done` is called once, with the error when it failed. May throw (counted as an error). */
  send(bytes: Buffer, done: (err: Error | null) => void): void;
  /** a batch was dropped because the transport was not ready, or its send failed: re-read the backend's state */
  trouble(err?: Error): void;
}

export class PickBatcher {
  /** this process's id in every batch it sends */
  readonly sender = randomBytes(SENDER_BYTES);
  private queue: Learned[] = [];
  private queuedHashes = 0;
  /** stored answers (the Responses API's ids) learned this turn: they go out as a batch of their own */
  private answers: StoredAnswer[] = [];
  private flushScheduled = false;
  private outstanding = 0;
  private closed = false;

  constructor(
    private readonly transport: BatchTransport,
    private readonly count: (direction: Direction, result: Result, n: number) => void,
  ) {}

  /**
   * A pick this gateway learned (Router onLearn). `chain` is the router's reused buffer: its first
   * `totalBlocks` entries are copied. Never throws, never waits.
   */
  learned(pool: string, endpoint: string, chain: ArrayLike<number>, totalBlocks: number): void {
    if (this.closed) return;
    const n = Math.min(totalBlocks, chain.length, MAX_HASHES);
    if (n <= 0) return;
    if (
      !this.transport.ready() ||
      this.queue.length >= MAX_RECORDS ||
      this.queuedHashes + n > MAX_BATCH_HASHES ||
      !nameFits(pool) ||
      !nameFits(endpoint)
    ) {
      this.count('sent', 'dropped', 1);
      return;
    }
    const hashes = new Uint32Array(n);
    for (let i = 0; i < n; i++) hashes[i] = chain[i] >>> 0;
    this.queue.push({ pool, endpoint, hashes });
    this.queuedHashes += n;
    this.schedule();
  }

  /**
   * An answer this gateway relayed and the model server stored (ResponseAffinity's remember): sent in the
   * turn's batch of stored answers; `a` is kept as given (the caller makes it for this call). Never throws,
   * never waits.
   */
  answered(a: StoredAnswer): void {
    if (this.closed) return;
    if (!this.transport.ready() || this.answers.length >= MAX_RECORDS || !answerFits(a)) {
      this.count('sent', 'dropped', 1);
      return;
    }
    this.answers.push(a);
    this.schedule();
  }

  private schedule(): void {
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
    const answers = this.answers;
    this.answers = [];
    if (this.closed) return;
    if (batch.length > 0) this.send(batch.length, () => encode(this.sender, batch));
    if (answers.length > 0) this.send(answers.length, () => encodeAnswers(this.sender, answers));
  }

  /** One batch of `records` records (encoded by `encode`) to the transport, each record counted once. */
  private send(records: number, encodeBatch: () => Buffer): void {
    if (!this.transport.ready() || this.outstanding >= MAX_OUTSTANDING) {
      this.count('sent', 'dropped', records);
      this.transport.trouble();
      return;
    }
    let bytes: Buffer;
    try {
      bytes = encodeBatch();
    } catch {
      this.count('sent', 'dropped', records);
      return;
    }
    this.outstanding++;
    let answered = false;
    const done = (err: Error | null): void => {
      if (answered) return;
      answered = true;
      this.outstanding--;
      this.count('sent', err ? 'error' : 'ok', records);
      if (err) this.transport.trouble(err);
    };
    try {
      this.transport.send(bytes, done);
    } catch (err) {
      // the channel closed between the check and the send
      done(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * A batch from the backend: decoded (malformed: counted, dropped), ours skipped, the others' picks (or
   * stored answers, with `remember`) applied.
   */
  received(message: Buffer, apply: (pool: string, endpoint: string, hashes: Uint32Array) => void, remember?: (a: StoredAnswer) => void): void {
    if (message.length > 1 && message[1] === ANSWERS_VERSION) return this.receivedAnswers(message, remember);
    let batch;
    try {
      batch = decode(message);
    } catch {
      this.count('received', 'invalid', 1);
      return;
    }
    if (batch.sender.equals(this.sender)) return; // our own, back from the channel
    for (const r of batch.records) {
      try {
        apply(r.pool, r.endpoint, r.hashes);
      } catch {
        this.count('received', 'invalid', 1);
        continue;
      }
      this.count('received', 'ok', 1);
    }
  }

  private receivedAnswers(message: Buffer, remember: ((a: StoredAnswer) => void) | undefined): void {
    let batch;
    try {
      batch = decodeAnswers(message);
    } catch {
      this.count('received', 'invalid', 1);
      return;
    }
    if (batch.sender.equals(this.sender)) return;
    for (const a of batch.answers) {
      try {
        if (remember === undefined) throw new Error('stored answers are not taken here');
        remember(a);
      } catch {
        this.count('received', 'invalid', 1);
        continue;
      }
      this.count('received', 'ok', 1);
    }
  }

  close(): void {
    this.closed = true;
    this.queue = [];
    this.answers = [];
  }
}
