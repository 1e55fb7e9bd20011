/**
 * The undici side of an exchange: one dispatch per try to the chosen endpoint's Pool, with one `Attempt`
 * object per try carrying undici's callbacks (rather than a closure per callback), and how upstream
 * failures are told apart (which statuses are retried, which errors are timeouts).
 */
import type { Dispatcher } from 'undici';
import type { ApiKind } from '../openai/validate.js';
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
}

/** Statuses another endpoint may answer better: the request goes there while retries last. */
export function retryableStatus(status: number): boolean {
  return status === 502 || status === 503;
}

/** undici's timeout errors (first byte, connect, idle body), answered 504 rather than 502. */
export function isTimeout(err: Error): boolean {
  const code = (err as { code?: string }).code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
}

/** Sends try `attempt` of a request to `endpoint` (a POST of the given API with its body). */
export function dispatchTry(
  upstreams: Upstreams,
  endpoint: string,
  kind: ApiKind,
  headers: Record<string, string>,
  body: Buffer,
  listener: UpstreamListener,
  attempt: number,
): void {
  // (no `origin`: a Pool sends to its own)
  upstreams.get(endpoint).dispatch(
    { path: kind === 'chat' ? '/v1/chat/completions' : '/v1/completions', method: 'POST', headers, body },
    new Attempt(listener, attempt),
  );
}

/**
 * undici's callbacks for one try of an exchange: a try superseded by a retry, or outliving its exchange,
 * is ignored (and aborted if it has not started).
 */
class Attempt implements Dispatcher.DispatchHandler {
  constructor(
    private readonly ex: UpstreamListener,
    private readonly id: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.ex.isCurrent(this.id)) this.ex.upstreamStarted(controller);
    else controller.abort(new Error('superseded'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamResponse(controller, statusCode, headers);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamData(chunk);
  }

  onResponseEnd(): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamEnd();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.ex.isCurrent(this.id)) this.ex.onUpstreamError(err);
  }
}
