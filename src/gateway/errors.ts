/**
 * The one vocabulary of client-facing errors. Every error a client can receive is built here, with
 * OpenAI's body shape `{"error":{"message","type","param","code"}}`, the HTTP status, and a stable `code`.
 * Messages never name a backend address and never carry a stack trace.
 */

import { STATUS_CODES } from 'node:http';

export interface ApiError {
  status: number;
  statusText: string;
  type: string;
  code: string;
  message: string;
  param: string | null;
  /** Seconds, sent as Retry-After (always present on 429). */
  retryAfterS?: number;
  /** Label for infergate_rejected_total, when this error is a rejection rather than an upstream failure. */
  rejectReason?: 'saturated' | 'rate_limited' | 'unauthorized' | 'forbidden' | 'invalid';
}

/** "200 OK": uWS needs the reason phrase with the code. */
export function statusLine(status: number): string {
  const reason = STATUS_CODES[status];
  return reason ? `${status} ${reason}` : `${status} Unknown`;
}

function make(status: number, type: string, code: string, message: string, extra: Partial<ApiError> = {}): ApiError {
  return { status, statusText: statusLine(status), type, code, message, param: null, ...extra };
}

export const errors = {
  invalidJson: (detail: string) =>
    make(400, 'invalid_request_error', 'invalid_json', `The request body is not valid JSON: ${detail}`, { rejectReason: 'invalid' }),
  notAnObject: () =>
    make(400, 'invalid_request_error', 'invalid_body', 'The request body must be a JSON object.', { rejectReason: 'invalid' }),
  missingModel: () =>
    make(400, 'invalid_request_error', 'missing_model', 'The "model" field is required and must be a string.', {
      param: 'model', rejectReason: 'invalid',
    }),
  invalidField: (param: string, message: string) =>
    make(400, 'invalid_request_error', 'invalid_field', message, { param, rejectReason: 'invalid' }),
  modelNotFound: (model: string) =>
    make(404, 'invalid_request_error', 'model_not_found', `The model "${truncate(model, 200)}" does not exist or is not served here.`, {
      param: 'model',
    }),
  routeNotFound: (method: string, url: string) =>
    make(404, 'invalid_request_error', 'not_found', `No route for ${method} ${truncate(url, 200)}.`),
  methodNotAllowed: (method: string, url: string) =>
    make(405, 'invalid_request_error', 'method_not_allowed', `${method} is not allowed on ${truncate(url, 200)}.`),
  bodyTooLarge: (limit: number) =>
    make(413, 'invalid_request_error', 'request_too_large', `The request body is larger than the limit of ${limit} bytes.`, {
      rejectReason: 'invalid',
    }),
  headersTooLarge: (limit: number) =>
    make(431, 'invalid_request_error', 'headers_too_large', `The request headers are larger than the limit of ${limit} bytes.`, {
      rejectReason: 'invalid',
    }),
  unsupportedEncoding: (encoding: string) =>
    make(415, 'invalid_request_error', 'unsupported_content_encoding',
      `Request bodies with Content-Encoding "${truncate(encoding, 50)}" are not accepted; send the JSON uncompressed.`, {
        rejectReason: 'invalid',
      }),
  saturated: (pool: string, retryAfterS: number) =>
    make(429, 'rate_limit_error', 'pool_saturated', `Every server of pool "${pool}" is saturated; retry after ${retryAfterS} s.`, {
      retryAfterS, rejectReason: 'saturated',
    }),
  noEndpoint: () =>
    make(503, 'server_error', 'no_endpoint', 'No model server is available for this model right now.', { retryAfterS: 1 }),
  upstreamUnavailable: () =>
    make(502, 'server_error', 'upstream_unavailable', 'The model server could not be reached or failed before answering.'),
  upstreamOverloaded: () =>
    make(503, 'server_error', 'upstream_unavailable', 'The model servers are unavailable; try again shortly.', { retryAfterS: 1 }),
  upstreamTimeout: () =>
    make(504, 'server_error', 'upstream_timeout', 'The model server did not answer in time.'),
  upstreamStreamBroken: () =>
    make(502, 'server_error', 'upstream_stream_broken', 'The model server stopped in the middle of the answer.'),
  shuttingDown: () =>
    make(503, 'server_error', 'shutting_down', 'The gateway is shutting down; retry on another instance.', { retryAfterS: 1 }),
  internal: () => make(500, 'server_error', 'internal_error', 'The gateway failed to handle this request.'),
};

export function errorBody(e: ApiError): string {
  return JSON.stringify({ error: { message: e.message, type: e.type, param: e.param, code: e.code } });
}

/** The SSE event that ends a stream which broke after its first byte. */
export function errorEvent(e: ApiError): string {
  return `data: ${errorBody(e)}\n\n`;
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
