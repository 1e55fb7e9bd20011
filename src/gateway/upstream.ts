/**
 * The undici side of an exchange: one dispatch per try to the chosen endpoint's Pool, with one `Attempt`
 * object per try carrying undici's callbacks (rather than a closure per callback), and how upstream
 * failures are told apart (which statuses are retried, which errors are timeouts).
 */
import type { Dispatcher, FormData } from 'undici';
import { API_PATHS, type ApiKind } from '../openai/validate.js';
import type { Upstreams } from './upstreams.js';

type ResponseHeaders = Record<string, string | string[] | undefined>;

/** What an exchange does with undici's callbacks for its current try. */
export interface UpstreamListener {
  /** whether try `attempt` still matters (not superseded by a retry, exchange not over) */
  isCurrent(attempt: number): boolean;
  /** undici is about to write the request */
  upstreamStarted(controller: Dispatcher.DispatchController): void;
  onUpstreamResponse(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void;
  onUpstreamData(chunk: Buffer): void;
  onUpstreamEnd(): void;
  onUpstreamError(err: Error): void;
  /** a bug in the exchange's handling of a callback: it answers for it (nothing reaches undici) */
  onInternalError(err: unknown): void;
}

/** A TLS handshake with the model server failed (its certificate not trusted or not for its name, or no TLS there). */
export function isTlsFailure(err: unknown): string | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|^ERR_TLS|^ERR_SSL|^EPROTO$/.test(code) ? code : undefined;
}

/** undici's timeout errors (first byte, connect, idle body), answered 504 rather than 502. */
export function isTimeout(err: Error): boolean {
  const code = (err as { code?: string }).code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
}

/**
 * Sends try `attempt` of a request to `endpoint` (a POST of the given API with its body). `idleMs` is
 * undici's headers and body timeout for this try: how long the model server may send nothing (a stream:
 * first_byte_timeout); 0 for none (a non-streamed answer: the exchange times the whole answer itself).
 */
export function dispatchTry(
  upstreams: Upstreams,
  endpoint: string,
  kind: ApiKind,
  headers: Record<string, string>,
  /** the request's bytes, or an audio API's form (undici encodes it as it sends it) */
  body: Buffer | FormData,
  listener: UpstreamListener,
  attempt: number,
  idleMs: number,
  /** another method and path than the API's POST (a call on a stored Responses API answer: sent without a body) */
  target?: { method: 'GET' | 'POST'; path: string },
): void {
  // (no `origin`: a Pool sends to its own)
  upstreams.get(endpoint).dispatch(
    target === undefined
      ? { path: API_PATHS[kind], method: 'POST', headers, body, headersTimeout: idleMs, bodyTimeout: idleMs }
      : { path: target.path, method: target.method, headers, body: null, headersTimeout: idleMs, bodyTimeout: idleMs },
    new Attempt(listener, attempt),
  );
}

/**
 * undici's callbacks for one try of an exchange: a try superseded by a retry, or outliving its exchange,
 * is ignored (and aborted if it has not started). An exception in the exchange's handling goes to its
 * onInternalError, never into undici (which would tear down the connection's other state).
 */
class Attempt implements Dispatcher.DispatchHandler {
  constructor(
    private readonly ex: UpstreamListener,
    private readonly id: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    try {
      if (this.ex.isCurrent(this.id)) this.ex.upstreamStarted(controller);
      else controller.abort(new Error('superseded'));
    } catch (err) {
      this.ex.onInternalError(err);
    }
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    // An interim answer (102 Processing, 103 Early Hints) is not the answer: the final one follows. (undici
    // 7 itself treats a 100 Continue the gateway did not ask for as a broken connection: see the README.)
    if (statusCode < 200) return;
    try {
      if (this.ex.isCurrent(this.id)) this.ex.onUpstreamResponse(controller, statusCode, headers);
    } catch (err) {
      this.ex.onInternalError(err);
    }
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    try {
      if (this.ex.isCurrent(this.id)) this.ex.onUpstreamData(chunk);
    } catch (err) {
      this.ex.onInternalError(err);
    }
  }

  onResponseEnd(): void {
    try {
      if (this.ex.isCurrent(this.id)) this.ex.onUpstreamEnd();
    } catch (err) {
      this.ex.onInternalError(err);
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    try {
      if (this.ex.isCurrent(this.id)) this.ex.onUpstreamError(err);
    } catch (bug) {
      this.ex.onInternalError(bug);
    }
  }
}
