/**
 * The one vocabulary of client-facing errors. Every error a client can receive from the gateway is built
 * here, with OpenAI's body shape `{"error":{"message","type","param","code"}}`, the HTTP status, and a
 * stable `code` from ERROR_CODES (a test pins each code's status and type: renaming one is deliberate).
 * Messages never name a backend address and never carry a stack trace. Pure.
 */
import { STATUS_CODES } from 'node:http';
import { sseEvent } from './sse.js';

/** Each stable code with its HTTP status and OpenAI error type. */
export const ERROR_CODES = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_body: { status: 400, type: 'invalid_request_error' },
  json_too_deep: { status: 400, type: 'invalid_request_error' },
  missing_model: { status: 400, type: 'invalid_request_error' },
  invalid_field: { status: 400, type: 'invalid_request_error' },
  invalid_header: { status: 400, type: 'invalid_request_error' },
  invalid_framing: { status: 400, type: 'invalid_request_error' },
  invalid_multipart: { status: 400, type: 'invalid_request_error' },
  missing_token: { status: 401, type: 'invalid_request_error' },
  invalid_token: { status: 401, type: 'invalid_request_error' },
  model_not_allowed: { status: 403, type: 'invalid_request_error' },
  origin_not_allowed: { status: 403, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_content_encoding: { status: 415, type: 'invalid_request_error' },
  unsupported_content_type: { status: 415, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  pool_saturated: { status: 429, type: 'rate_limit_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'server_error' },
  upstream_unavailable: { status: 502, type: 'server_error' },
  upstream_tls_failed: { status: 502, type: 'server_error' },
  upstream_stream_broken: { status: 502, type: 'server_error' },
  no_endpoint: { status: 503, type: 'server_error' },
  request_buffers_full: { status: 503, type: 'server_error' },
  quota_unavailable: { status: 503, type: 'server_error' },
  shutting_down: { status: 503, type: 'server_error' },
  too_many_connections: { status: 503, type: 'server_error' },
  upstream_timeout: { status: 504, type: 'server_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;
export type ErrorType = (typeof ERROR_CODES)[ErrorCode]['type'];

export interface ApiError {
  status: number;
  statusText: string;
  type: ErrorType;
  code: ErrorCode;
  message: string;
  param: string | null;
  /** Seconds, sent as Retry-After (always present on 429). */
  retryAfterS?: number;
  /** Sent as WWW-Authenticate (401 answers, RFC 6750). */
  wwwAuthenticate?: string;
  /** Label for infergate_rejected_total, when this error is a rejection rather than an upstream failure. */
  rejectReason?: 'saturated' | 'queue_timeout' | 'overloaded' | 'rate_limited' | 'unauthorized' | 'forbidden' | 'invalid' | 'too_many_connections' | 'client_timeout';
}

/** "200 OK": uWS needs the reason phrase with the code. */
export function statusLine(status: number): string {
  const reason = STATUS_CODES[status];
  return reason ? `${status} ${reason}` : `${status} Unknown`;
}

function make(code: ErrorCode, message: string, extra: Partial<ApiError> = {}): ApiError {
  const { status, type } = ERROR_CODES[code];
  return { status, statusText: statusLine(status), type, code, message, param: null, ...extra };
}

export const errors = {
  invalidJson: (detail: string) => make('invalid_json', `The request body is not valid JSON: ${detail}`, { rejectReason: 'invalid' }),
  jsonTooDeep: (max: number) =>
    make('json_too_deep', `The request body nests objects and arrays more than ${max} levels deep.`, { rejectReason: 'invalid' }),
  notAnObject: () => make('invalid_body', 'The request body must be a JSON object.', { rejectReason: 'invalid' }),
  missingModel: () =>
    make('missing_model', 'The "model" field is required and must be a string.', { param: 'model', rejectReason: 'invalid' }),
  invalidField: (param: string, message: string) => make('invalid_field', message, { param, rejectReason: 'invalid' }),
  invalidHeader: (name: string) =>
    make('invalid_header', `The request header "${truncate(name, 100)}" has characters that cannot be sent on (control characters or characters outside Latin-1).`, {
      rejectReason: 'invalid',
    }),
  invalidFraming: (why: string) =>
    make('invalid_framing', `The request's framing is ambiguous: ${why}.`, { rejectReason: 'invalid' }),
  missingToken: () =>
    make('missing_token', 'This endpoint needs a token: send "Authorization: Bearer <token>".', {
      wwwAuthenticate: 'Bearer realm="infergate"',
      rejectReason: 'unauthorized',
    }),
  /** `category` says what is wrong in a few words ("expired", "bad signature"); never the token itself. */
  invalidToken: (category: string) =>
    make('invalid_token', `The bearer token was refused: ${category}.`, {
      wwwAuthenticate: `Bearer realm="infergate", error="invalid_token", error_description="${category.replace(/["\\]/g, '')}"`,
      rejectReason: 'unauthorized',
    }),
  modelNotAllowed: (model: string) =>
    make('model_not_allowed', `The token does not allow the model "${truncate(model, 200)}".`, { param: 'model', rejectReason: 'forbidden' }),
  /** A CORS preflight from an origin not in `cors.origins`. */
  originNotAllowed: (origin: string) =>
    make('origin_not_allowed', `Requests from the origin "${truncate(origin, 200)}" are not allowed here (cors.origins).`, { rejectReason: 'forbidden' }),
  /** A path's model id (GET /v1/models/{id}) that is not valid percent-encoding. */
  badModelId: () => make('invalid_field', 'The model id in the path is not valid percent-encoded UTF-8.', { param: 'model', rejectReason: 'invalid' }),
  modelNotFound: (model: string) =>
    make('model_not_found', `The model "${truncate(model, 200)}" does not exist or is not served here.`, { param: 'model' }),
  routeNotFound: (method: string, url: string) => make('not_found', `No route for ${method} ${truncate(url, 200)}.`),
  responseNotRelayed: (id: string, remembering: boolean) =>
    make(
      'not_found',
      remembering
        ? `No response with id '${truncate(id, 100)}' is known to this gateway: it did not relay that response (for this token's tenant), or has forgotten it (response_affinity keeps max_entries ids for ttl). Only the model server that stored a response can retrieve or cancel it.`
        : `No response with id '${truncate(id, 100)}' is known to this gateway: it does not remember relayed responses (response_affinity.max_entries is 0), so it cannot tell which model server stored one.`,
      { param: 'response_id' },
    ),
  /** A follow-up naming an answer the gateway relayed for another tenant (the id stays unconfirmed). */
  previousResponseNotFound: (id: string) =>
    make('not_found', `Previous response with id '${truncate(id, 100)}' not found.`, { param: 'previous_response_id' }),
  methodNotAllowed: (method: string, url: string) =>
    make('method_not_allowed', `${method} is not allowed on ${truncate(url, 200)}.`),
  bodyTooLarge: (limit: number) =>
    make('request_too_large', `The request body is larger than the limit of ${limit} bytes.`, { rejectReason: 'invalid' }),
  headersTooLarge: (limit: number) =>
    make('headers_too_large', `The request headers are larger than the limit of ${limit} bytes.`, { rejectReason: 'invalid' }),
  unsupportedEncoding: (encoding: string) =>
    make(
      'unsupported_content_encoding',
      `Request bodies with Content-Encoding "${truncate(encoding, 50)}" are not accepted; send the JSON uncompressed.`,
      { rejectReason: 'invalid' },
    ),
  /** An audio API's body not sent as a form. */
  notMultipart: (path: string) =>
    make('unsupported_content_type', `${truncate(path, 100)} takes a multipart/form-data body (Content-Type: multipart/form-data; boundary=...).`, {
      rejectReason: 'invalid',
    }),
  invalidMultipart: (detail: string) =>
    make('invalid_multipart', `The request body is not a valid multipart/form-data form: ${detail}.`, { rejectReason: 'invalid' }),
  saturated: (pool: string, retryAfterS: number) =>
    make('pool_saturated', `Every server of pool "${pool}" is saturated; retry after ${retryAfterS} s.`, {
      retryAfterS,
      rejectReason: 'saturated',
    }),
  /** A request that waited its pool's queue.max_wait without a server freeing up (flow control). */
  queueTimeout: (pool: string, waitedS: number, retryAfterS: number) =>
    make('pool_saturated', `Every server of pool "${pool}" stayed saturated while the request waited ${waitedS} s; retry after ${retryAfterS} s.`, {
      retryAfterS,
      rejectReason: 'queue_timeout',
    }),
  bodyBufferFull: () =>
    make('request_buffers_full', 'The gateway is holding as many request bodies as it may; retry shortly.', {
      retryAfterS: 1,
      rejectReason: 'overloaded',
    }),
  /** A tenant over one of its limits (`what`: "requests per minute", "tokens per minute", "concurrent requests"). */
  rateLimited: (tenant: string, what: string, limit: number, retryAfterS: number) =>
    make(
      'rate_limit_exceeded',
      `Rate limit reached for tenant "${truncate(tenant, 100)}" on ${what} (limit ${limit}); retry after ${retryAfterS} s.`,
      { retryAfterS, rejectReason: 'rate_limited' },
    ),
  /** The shared quota store did not answer and quota.on_backend_error is deny. */
  quotaUnavailable: () =>
    make('quota_unavailable', 'The quota service is unavailable; retry shortly.', { retryAfterS: 1, rejectReason: 'overloaded' }),
  noEndpoint: () => make('no_endpoint', 'No model server is available for this model right now.', { retryAfterS: 1 }),
  upstreamUnavailable: () =>
    make('upstream_unavailable', 'The model server could not be reached or failed before answering.'),
  upstreamTls: (pool: string, code: string) =>
    make('upstream_tls_failed', `The gateway could not establish TLS with the model server (${code}); if its certificate is signed by a private CA, set pools.${pool}.tls_ca_file.`),
  upstreamTimeout: () => make('upstream_timeout', 'The model server did not answer in time.'),
  upstreamStreamBroken: () => make('upstream_stream_broken', 'The model server stopped in the middle of the answer.'),
  shuttingDown: () =>
    make('shutting_down', 'The gateway is shutting down; retry on another instance.', { retryAfterS: 1 }),
  tooManyConnections: () =>
    make('too_many_connections', 'The gateway holds as many connections as it may (from this client or in all); retry shortly.', {
      retryAfterS: 1,
      rejectReason: 'too_many_connections',
    }),
  uploadTooSlow: (bytesPerS: number) =>
    make('request_timeout', `The request body arrived too slowly (under ${Math.round(bytesPerS / 1024)} KB/s).`, { rejectReason: 'client_timeout' }),
  internal: () => make('internal_error', 'The gateway failed to handle this request.'),
};

export function errorBody(e: ApiError): string {
  return JSON.stringify({ error: { message: e.message, type: e.type, param: e.param, code: e.code } });
}

/** The SSE event that ends a stream which broke after its first byte. */
export function errorEvent(e: ApiError): string {
  return sseEvent(errorBody(e));
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
