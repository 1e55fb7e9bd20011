/**
 * What the gateway sees of a client, whatever HTTP server sits in front: the facts of a request, read
 * once while its handler runs, and the response side an exchange writes to. The front adapter
 * (uws-front.ts) is the one module that knows the real server; everything else talks to these.
 *
 * uWS's own HttpResponse satisfies ClientSide as it is (the adapter checks that at compile time), so the
 * hot path pays no wrapper object and no extra call per write. What the interface leaves out
 * (onData, onAborted, endWithoutBody, the request object) stays with the adapter.
 */

/**
 * uWS 20.30 closes a connection whose request body brings less than 160 KB (16 KB/s × 10 s) within one of
 * its timeout periods, 8 to 12 s (its 10 s timer ticks every 4 s), with no answer. The front answers 408
 * first: a body still under way that has not brought UPLOAD_MARK_BYTES within UPLOAD_WINDOW_MS of the
 * last mark (the handler's start, then each time that many bytes have come) is refused (about 23 KB/s).
 */
export const UPLOAD_MARK_BYTES = 16 * 1024 * 10;
export const UPLOAD_WINDOW_MS = 7_000;

/** A request's head, copied out of the server's request object before its handler returned. */
export interface ClientRequest {
  method: string;
  url: string;
  /** the query string without `?`, '' when none */
  query: string;
  /** name, value, name, value… in arrival order; names are lower-case */
  headers: string[];
  /** the peer's address (IPv4 dotted, IPv6 compressed; '' when unknown) */
  peer: string;
}

/**
 * The client's half of a response. Rules for its users (uWS's, kept by the exchange and the relay):
 * - a write made outside the request handler (from an undici callback, a timer) goes inside `cork`;
 * - nothing is called once the response has ended or the client has gone (the exchange tracks both);
 * - `end(body, true)` (close the connection after the answer) only before any `write`: uWS 20.30 would
 *   otherwise put its `Connection: close` line inside the chunked body;
 * - one `onWritable` per response.
 */
export interface ClientSide {
  /** the status line with its reason phrase, e.g. "200 OK" */
  writeStatus(status: string): unknown;
  /** a Buffer value goes as its bytes (a string is written as UTF-8) */
  writeHeader(name: string, value: string | Buffer): unknown;
  /** false when the client is slower than we write: wait for `onWritable` before more */
  write(chunk: Buffer | string): boolean;
  end(body?: Buffer | string, closeConnection?: boolean): unknown;
  /** cut the connection at once (a body that cannot be completed must not look complete) */
  close(): unknown;
  /** runs `fn` with its writes sent together */
  cork(fn: () => void): unknown;
  /** `handler` runs when a refused write has drained; return true */
  onWritable(handler: () => boolean): unknown;
}

/** What the front calls on the exchange that handles a POST. */
export interface ClientHandler {
  /** whether the body is wanted (false once the request was refused from its head) */
  readonly wantsBody: boolean;
  /** the whole body, within the route's limit */
  onBody(body: Buffer): void;
  /** the body went over the route's limit: answer now; the rest is dropped as it arrives */
  onBodyTooLarge(): void;
  /** the bodies being gathered would pass their shared budget: answer now (503); the rest is dropped */
  onBodyBudgetExceeded(): void;
  /** the body arrives too slowly: uWS would cut the connection soon with no answer; answer now (408, close) */
  onBodyTooSlow(): void;
  /** the client went away; the response must not be touched any more */
  onClientAbort(): void;
  /** a bug in handling this request (thrown from one of the calls above): answer it, never throw */
  onInternalError(err: unknown): void;
}

/** A whole answer of the gateway's own (not relayed), as a GET, HEAD or fallback route gives it. */
export interface Answer {
  /** status line, e.g. "200 OK" */
  status: string;
  contentType?: string;
  retryAfterS?: number;
  /** a 401's challenge */
  wwwAuthenticate?: string;
  /** further header lines (Allow, CORS) */
  headers?: ReadonlyArray<readonly [string, string]>;
  /** left out in answer to HEAD */
  body?: string;
  /** for the access log: the error's stable code, and why the gateway refused the request */
  code?: string;
  rejectReason?: string;
}
