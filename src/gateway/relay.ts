/**
 * The model server's answer on its way to the client, once it is accepted (no retry): its head filtered,
 * then either gathered and sent whole, or streamed with the chunks of one event-loop turn written
 * together, and with backpressure (a slow client pauses the upstream read). A stream that breaks ends
 * with an SSE error event; the exchange cuts any other broken body.
 */
import { errorEvent, statusLine, type ApiError } from '../openai/errors.js';
import type { HistogramSeries } from '../observability/histogram.js';
import { EMPTY, joined } from './buffers.js';
import type { ClientSide } from './client.js';

/** Response headers not passed back: hop-by-hop ones and framing, which the front writes itself. */
const DROP_RESPONSE_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding',
  'upgrade', 'content-length', 'date', 'x-request-id', 'uwebsockets',
]);

/** Response headers that tell which server answered: passed back only with debug_headers. */
const DEBUG_RESPONSE_HEADERS = new Set(['x-mock-endpoint', 'server']);

/**
 * Non-streamed answers up to this size are gathered and sent with a Content-Length in one write: the client
 * gets the whole JSON or, if the model server dies before its end, a clean 502, never half a body. A larger
 * answer is passed on as it comes once this much has gathered.
 */
export const BUFFER_LIMIT = 1 << 20;

/**
 * The model server's response headers as they are passed on (repeated ones as several lines). Those it
 * names in its Connection header are hop-by-hop too (RFC 9110 §7.6.1), as on the request side.
 */
export function relayedHeaders(headers: Record<string, string | string[] | undefined>, debug = false): Array<[string, string | Buffer]> {
  const list: Array<[string, string | Buffer]> = [];
  const named = connectionNamed(headers.connection);
  for (const key in headers) {
    const v = headers[key];
    if (v === undefined || DROP_RESPONSE_HEADERS.has(key) || (!debug && DEBUG_RESPONSE_HEADERS.has(key))) continue;
    if (named?.has(key)) continue;
    // CORS is the gateway's to answer (the `cors` section): a model server's own (vLLM allows any origin by
    // default) would open the gateway to every page
    if (key.startsWith('access-control-')) continue;
    if (Array.isArray(v)) for (const one of v) list.push([key, asSent(one)]);
    else list.push([key, asSent(v)]);
  }
  return list;
}

/** The header names listed in a Connection header (one or several lines), lower-cased; none: undefined. */
function connectionNamed(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  const names = new Set<string>();
  for (const line of Array.isArray(value) ? value : [value]) {
    for (const name of line.split(',')) {
      const n = name.trim().toLowerCase();
      if (n !== '') names.add(n);
    }
  }
  return names;
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * A header value as the model server sent its bytes. undici reads header bytes as Latin-1 and the front
 * would write a string as UTF-8, so a UTF-8 value (`café`) would arrive double-encoded; its bytes go as
 * they came instead.
 */
function asSent(value: string): string | Buffer {
  return NON_ASCII.test(value) ? Buffer.from(value, 'latin1') : value;
}

/**
 * Whether to gather a whole answer before sending it: a non-SSE answer with a declared length within
 * the limit, or with no length for a request that did not ask to stream (its JSON is of no use to the
 * client before its end anyway). `contentLength` is -1 when not declared.
 */
export function gathers(sse: boolean, contentLength: number, streamRequested: boolean): boolean {
  return !sse && (contentLength >= 0 ? contentLength <= BUFFER_LIMIT : !streamRequested);
}

/** What the relay needs from its exchange. */
export interface RelayOwner {
  readonly client: ClientSide;
  /** still relaying: the exchange is not over and the client is still there */
  relaying(): boolean;
  /** writes the gateway's own headers after the model server's (inside the relay's cork) */
  writeOwnHeaders(): void;
  pauseUpstream(): void;
  resumeUpstream(): void;
  /** a whole answer closes its connection (while draining for shutdown) */
  closesConnection(): boolean;
  /** a bug in the relay's own callbacks (a microtask, onWritable): the exchange answers for it */
  onInternalError(err: unknown): void;
  /** the client has not taken the answer for too long (see Relay's stall clock): end it, saying why */
  clientStalled(why: string): void;
}

/**
 * uWS 20.30 closes a connection 8 to 12 s after a write it could not complete if no writable event
 * came since (its fixed 10 s timeout, on a 4 s tick), and the exchange would only see an abort that
 * looks like the client's. The relay ends such a stream itself before: after this long without the
 * client taking a byte (3 s before uWS's earliest cut, so a late timer on a busy event loop still wins).
 */
export const NOT_READING_MS = 5_000;
const STALL_RECHECK_MS = 250;

export class Relay {
  readonly sse: boolean;
  headersSent = false;
  /** inter-token latency series, set by the exchange at the first byte */
  itl: HistogramSeries | undefined;
  private readonly headers: Array<[string, string | Buffer]>;
  private buffered: Buffer[] | null;
  private bufferedBytes = 0;
  /** streamed chunks of this event-loop turn, written together by flush */
  private pending: Buffer[] = [];
  private flushScheduled = false;
  /** made on the first streamed chunk (a gathered answer never needs it) */
  private flushFn: (() => void) | undefined;
  private lastChunkAt = 0;
  private paused = false;
  private writableHooked = false;
  // The stall clock (performance.now() values, 0: not running). behindSince: the first write of the
  // current backlog the client did not take whole; refusedAt: the last such write with no writable event
  // since (uWS's own timer runs from it).
  private behindSince = 0;
  private refusedAt = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  /** when stallTimer fires (Infinity: none armed) */
  private stallTimerDue = Infinity;

  constructor(
    private readonly owner: RelayOwner,
    readonly status: number,
    upstreamHeaders: Record<string, string | string[] | undefined>,
    streamRequested: boolean,
    /** limits.client_stall_timeout: how long the client may stay behind (Infinity: only uWS's bound) */
    private readonly stallTimeoutMs = Infinity,
    /** debug_headers: the model server's own identifying headers pass too */
    debugHeaders = false,
    /** how long a client may take no byte at all (NOT_READING_MS; shorter in tests) */
    private readonly notReadingMs = NOT_READING_MS,
  ) {
    const contentType = upstreamHeaders['content-type'];
    const contentLength = upstreamHeaders['content-length'];
    this.headers = relayedHeaders(upstreamHeaders, debugHeaders);
    this.sse = contentType !== undefined && String(contentType).startsWith('text/event-stream');
    this.buffered = gathers(this.sse, contentLength === undefined ? -1 : Number(contentLength), streamRequested) ? [] : null;
  }

  data(chunk: Buffer): void {
    if (this.buffered) {
      this.buffered.push(chunk);
      this.bufferedBytes += chunk.length;
      if (this.bufferedBytes <= BUFFER_LIMIT) return;
      // Longer than announced, or than the limit: what has gathered goes now, the rest as it comes.
      this.pending = this.buffered;
      this.buffered = null;
    } else {
      // One upstream read often holds several HTTP chunks (several SSE events): gather what arrives in
      // this turn of the event loop and send it in one write, one syscall instead of one per event.
      this.pending.push(chunk);
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask((this.flushFn ??= () => this.guarded()));
    }
  }

  /** flush, as a microtask: nothing it throws may reach the process */
  private guarded(): void {
    try {
      this.flush();
    } catch (err) {
      this.owner.onInternalError(err);
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.pending.length === 0 || !this.owner.relaying()) return;
    const data = this.takePending();
    const client = this.owner.client;
    let ok = true;
    client.cork(() => {
      if (!this.headersSent) this.writeHead();
      ok = client.write(data);
    });
    if (ok) {
      this.behindSince = 0; // caught up: the stall clock stops
      this.refusedAt = 0;
      if (this.paused) {
        // A chunk already on its way when the upstream was paused, taken whole with what was refused before
        // it: the front has drained, so the upstream is read again now. Waiting for a writable event could
        // mean waiting forever (the kernel, left nearly full, may never report one), with the stall clock
        // stopped: the stream would hang until uWS or the client gave up.
        this.paused = false;
        this.owner.resumeUpstream();
      }
    } else {
      // The client is slower than the model server: stop reading upstream until the front has drained.
      this.paused = true;
      this.owner.pauseUpstream();
      const now = performance.now();
      if (this.behindSince === 0) this.behindSince = now;
      this.refusedAt = now;
      this.armStallTimer(now);
      if (!this.writableHooked) {
        this.writableHooked = true;
        client.onWritable(() => {
          this.refusedAt = 0; // the client took some: uWS's timer is off until the next refused write
          try {
            if (this.paused && this.owner.relaying()) {
              this.paused = false;
              this.owner.resumeUpstream();
            }
          } catch (err) {
            this.owner.onInternalError(err);
          }
          return true;
        });
      }
    }
  }

  /** When the stall clock runs out, or Infinity. */
  private stallDeadline(): number {
    if (this.behindSince === 0) return Infinity;
    const notReading = this.refusedAt === 0 ? Infinity : this.refusedAt + this.notReadingMs;
    return Math.min(notReading, this.behindSince + this.stallTimeoutMs);
  }

  /**
   * A timer for the stall deadline (one at a time; it re-arms itself while the deadline moves). One armed
   * for later than the deadline now is replaced: a write refused after the client took some (its
   * not-reading clock restarts) while the timer waits for the longer client_stall_timeout.
   */
  private armStallTimer(now: number): void {
    const deadline = this.stallDeadline();
    if (this.stallTimer !== undefined) {
      if (this.stallTimerDue <= deadline) return;
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
      this.stallTimerDue = Infinity;
    }
    if (deadline === Infinity) return;
    this.stallTimerDue = deadline;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      this.stallTimerDue = Infinity;
      try {
        if (!this.owner.relaying()) return;
        const at = performance.now();
        const due = this.stallDeadline();
        if (due === Infinity) return;
        if (at < due) {
          this.armStallTimer(at);
          return;
        }
        if (!this.paused) {
          // the client took what was refused and the upstream read goes on: whether it caught up shows
          // at the next write; look again shortly
          this.stallTimerDue = at + STALL_RECHECK_MS;
          this.stallTimer = setTimeout(() => this.recheckStall(), STALL_RECHECK_MS);
          this.stallTimer.unref();
          return;
        }
        const why = this.refusedAt !== 0 && at >= this.refusedAt + this.notReadingMs
          ? `the client took no byte for ${Math.round(at - this.refusedAt)} ms`
          : `the client stayed behind the model server for ${Math.round(at - this.behindSince)} ms (limits.client_stall_timeout)`;
        this.owner.clientStalled(why);
      } catch (err) {
        this.owner.onInternalError(err);
      }
    }, Math.max(1, deadline - now));
    this.stallTimer.unref();
  }

  private recheckStall(): void {
    this.stallTimer = undefined;
    this.stallTimerDue = Infinity;
    this.armStallTimer(performance.now());
  }

  /** The exchange is over: no stall clock any more. */
  dispose(): void {
    if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    this.stallTimerDue = Infinity;
  }

  /** The gathered chunks as one buffer (empty when none), with the gap since the last write as ITL. */
  private takePending(): Buffer {
    const n = this.pending.length;
    if (n === 0) return EMPTY;
    const now = performance.now();
    if (this.sse && this.lastChunkAt !== 0) this.itl?.observe((now - this.lastChunkAt) / 1000);
    this.lastChunkAt = now;
    const data = joined(this.pending);
    this.pending = [];
    return data;
  }

  private writeHead(): void {
    this.headersSent = true;
    const client = this.owner.client;
    client.writeStatus(statusLine(this.status));
    for (const [k, v] of this.headers) client.writeHeader(k, v);
    this.owner.writeOwnHeaders();
  }

  /** The model server's answer is complete: send what is left and end the response. */
  end(): void {
    const body = this.buffered ? joined(this.buffered) : this.takePending();
    const client = this.owner.client;
    client.cork(() => {
      if (!this.headersSent) {
        this.writeHead();
        // While draining for shutdown, a whole answer closes its connection (`Connection: close`), so the
        // client's next request goes elsewhere. Not after a streamed body: uWS 20.30 would write that
        // header into the chunked body.
        if (this.owner.closesConnection()) {
          client.end(body, true);
          return;
        }
      }
      if (body.length > 0) client.end(body);
      else client.end();
    });
  }

  /** An SSE stream broke after its head was sent: what is pending, then an error event, then the end. */
  endWithErrorEvent(e: ApiError): void {
    const data = this.takePending();
    const client = this.owner.client;
    client.cork(() => {
      if (data.length > 0) client.write(data);
      client.write(errorEvent(e));
      client.end();
    });
  }
}
