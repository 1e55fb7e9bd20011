// The client error codes are a contract: users match on `code`, status and `type`. This table is written
// out by hand so that renaming a code, or moving it to another status, is a deliberate edit here too.
import t from 'tap';
import { ERROR_CODES, errorBody, errorEvent, errors, statusLine, type ApiError } from '../../src/openai/errors.js';

const PINNED: Record<string, [number, string]> = {
  invalid_json: [400, 'invalid_request_error'],
  invalid_body: [400, 'invalid_request_error'],
  json_too_deep: [400, 'invalid_request_error'],
  missing_model: [400, 'invalid_request_error'],
  invalid_field: [400, 'invalid_request_error'],
  invalid_header: [400, 'invalid_request_error'],
  invalid_framing: [400, 'invalid_request_error'],
  invalid_multipart: [400, 'invalid_request_error'],
  missing_token: [401, 'invalid_request_error'],
  invalid_token: [401, 'invalid_request_error'],
  model_not_allowed: [403, 'invalid_request_error'],
  origin_not_allowed: [403, 'invalid_request_error'],
  model_not_found: [404, 'invalid_request_error'],
  not_found: [404, 'invalid_request_error'],
  method_not_allowed: [405, 'invalid_request_error'],
  request_too_large: [413, 'invalid_request_error'],
  unsupported_content_encoding: [415, 'invalid_request_error'],
  unsupported_content_type: [415, 'invalid_request_error'],
  request_timeout: [408, 'invalid_request_error'],
  headers_too_large: [431, 'invalid_request_error'],
  pool_saturated: [429, 'rate_limit_error'],
  rate_limit_exceeded: [429, 'rate_limit_error'],
  internal_error: [500, 'server_error'],
  upstream_unavailable: [502, 'server_error'],
  upstream_tls_failed: [502, 'server_error'],
  upstream_stream_broken: [502, 'server_error'],
  no_endpoint: [503, 'server_error'],
  request_buffers_full: [503, 'server_error'],
  quota_unavailable: [503, 'server_error'],
  shutting_down: [503, 'server_error'],
  too_many_connections: [503, 'server_error'],
  upstream_timeout: [504, 'server_error'],
};

t.test('each code has its pinned status and type, and no code is unpinned', async (t) => {
  t.same(Object.keys(ERROR_CODES).sort(), Object.keys(PINNED).sort());
  for (const [code, [status, type]] of Object.entries(PINNED)) {
    t.same(ERROR_CODES[code as keyof typeof ERROR_CODES], { status, type }, code);
  }
});

// every factory, with made-up arguments
const built: ApiError[] = [
  errors.invalidJson('x'), errors.jsonTooDeep(64), errors.notAnObject(), errors.missingModel(), errors.invalidField('stream', 'm'), errors.invalidHeader('x-a'), errors.invalidFraming('x'),
  errors.missingToken(), errors.invalidToken('expired'), errors.modelNotAllowed('m'), errors.originNotAllowed('https://evil.example'), errors.badModelId(),
  errors.modelNotFound('m'), errors.routeNotFound('GET', '/x'), errors.responseNotRelayed('resp_1', true), errors.previousResponseNotFound('resp_1'), errors.methodNotAllowed('GET', '/v1/completions'),
  errors.bodyTooLarge(10), errors.headersTooLarge(10), errors.unsupportedEncoding('gzip'), errors.notMultipart('/v1/audio/transcriptions'), errors.invalidMultipart('x'), errors.saturated('p', 3), errors.queueTimeout('p', 2.5, 3),
  errors.bodyBufferFull(), errors.rateLimited('t', 'requests per minute', 60, 2), errors.quotaUnavailable(), errors.noEndpoint(), errors.upstreamUnavailable(), errors.upstreamTls('p', 'DEPTH_ZERO_SELF_SIGNED_CERT'), errors.upstreamTimeout(), errors.upstreamStreamBroken(),
  errors.shuttingDown(), errors.internal(), errors.tooManyConnections(), errors.uploadTooSlow(23_000),
];

t.test('every factory builds an error whose status, reason phrase and type follow its code', async (t) => {
  t.equal(built.length, Object.keys(errors).length, 'every factory is called above');
  t.same(new Set(built.map((e) => e.code)), new Set(Object.keys(PINNED)), 'every code is built by some factory');
  for (const e of built) {
    t.equal(e.status, PINNED[e.code][0], `${e.code} status`);
    t.equal(e.type, PINNED[e.code][1], `${e.code} type`);
    t.equal(e.statusText, statusLine(e.status), `${e.code} status line`);
  }
  t.equal(errors.saturated('p', 3).retryAfterS, 3, 'a 429 carries its Retry-After');
  const limited = errors.rateLimited('team-a', 'tokens per minute', 1000, 7);
  t.equal(limited.retryAfterS, 7, 'a tenant\'s 429 carries its Retry-After');
  t.equal(limited.rejectReason, 'rate_limited', 'and counts as rejected{reason="rate_limited"}');
  t.match(limited.message, /team-a.*tokens per minute.*1000.*7 s/);
  t.equal(errors.quotaUnavailable().retryAfterS, 1);
  const waited = errors.queueTimeout('p', 2.5, 4);
  t.match(waited, { status: 429, code: 'pool_saturated', retryAfterS: 4, rejectReason: 'queue_timeout' }, 'a wait past max_wait: 429 with Retry-After');
});

t.test('the body is OpenAI-shaped, and the SSE error event frames it', async (t) => {
  const e = errors.invalidField('n', 'bad n');
  t.same(JSON.parse(errorBody(e)), { error: { message: 'bad n', type: 'invalid_request_error', param: 'n', code: 'invalid_field' } });
  t.equal(errorEvent(e), `data: ${errorBody(e)}\n\n`);
  t.equal(statusLine(200), '200 OK');
  t.equal(statusLine(599), '599 Unknown');
  t.ok(errors.modelNotFound('x'.repeat(500)).message.length < 300, 'a long model name is cut in the message');
});
