// The gateway's pure request checks: head facts and forwarded headers, head refusals and their order,
// body checks and their order. No sockets.
import t from 'tap';
import { addUpstreamHeaders, checkBody, DISCARD_LIMIT, headRefusal, readRequest, withModel, type HeadLimits, type RequestFacts } from '../../src/gateway/request-checks.js';
import type { ClientRequest } from '../../src/gateway/client.js';

const NO_STICKY: ReadonlySet<string> = new Set();
const newId = () => 'generated-id';

function req(headers: string[], url = '/v1/chat/completions', query = ''): ClientRequest {
  return { method: 'post', url, query, headers, peer: '' };
}

function facts(over: Partial<RequestFacts> = {}): RequestFacts {
  return { requestId: 'r', stickyValue: undefined, forwarded: {}, declaredLength: 10, headerBytes: 100, encoding: '', ...over };
}

const LIMITS: HeadLimits = { max_header_bytes: 1000, max_body_bytes: 5000 };

t.test('forwarded headers: hop-by-hop, framing and credentials dropped, the rest kept', async (t) => {
  const f = readRequest(
    req([
      'host', 'gw', 'connection', 'keep-alive', 'keep-alive', 'timeout=5', 'te', 'trailers', 'transfer-encoding', 'chunked',
      'upgrade', 'h2c', 'proxy-authorization', 'x', 'content-length', '12', 'authorization', 'Bearer client', 'expect', '100-continue',
      'traceparent', 'tp', 'x-custom', 'v', 'content-type', 'application/json',
    ]),
    NO_STICKY,
    newId,
  );
  t.same(f.forwarded, { traceparent: 'tp', 'x-custom': 'v', 'content-type': 'application/json', 'x-request-id': 'generated-id' });
});

t.test('a repeated header is one list; cookies join with "; "; Object property names are plain headers', async (t) => {
  const f = readRequest(req(['tracestate', 'a=1', 'tracestate', 'b=2', 'cookie', 'x=1', 'cookie', 'y=2', 'constructor', 'c']), NO_STICKY, newId);
  t.equal(f.forwarded.tracestate, 'a=1, b=2');
  t.equal(f.forwarded.cookie, 'x=1; y=2');
  t.equal(f.forwarded.constructor, 'c');
});

t.test('headers named in Connection are not forwarded', async (t) => {
  const f = readRequest(req(['connection', 'keep-alive, X-Hop ,x-other', 'x-hop', 'h', 'x-other', 'o', 'x-end', 'e']), NO_STICKY, newId);
  t.same(f.forwarded, { 'x-end': 'e', 'x-request-id': 'generated-id' });
});

t.test('x-request-id: the client\'s kept up to 200 characters, else a new one; always forwarded', async (t) => {
  const kept = readRequest(req(['x-request-id', 'req-123']), NO_STICKY, newId);
  t.equal(kept.requestId, 'req-123');
  t.equal(kept.forwarded['x-request-id'], 'req-123');
  t.equal(readRequest(req(['x-request-id', 'a'.repeat(200)]), NO_STICKY, newId).requestId, 'a'.repeat(200));
  t.equal(readRequest(req(['x-request-id', 'a'.repeat(201)]), NO_STICKY, newId).requestId, 'generated-id');
  t.equal(readRequest(req(['x-request-id', '']), NO_STICKY, newId).requestId, 'generated-id');
  let calls = 0;
  readRequest(req(['x-request-id', 'mine']), NO_STICKY, () => `${++calls}`);
  t.equal(calls, 0, 'no id is made when the client sent one');
});

t.test('sticky header value, encoding, declared length and header bytes', async (t) => {
  const f = readRequest(
    req(['x-session', 's1', 'content-encoding', 'gzip', 'content-length', '42', 'content-length', '7'], '/v1/completions', 'a=b'),
    new Set(['x-session']),
    newId,
  );
  t.equal(f.stickyValue, 's1');
  t.equal(f.encoding, 'gzip');
  t.equal(f.declaredLength, 42, 'the first Content-Length counts');
  t.match(f.badFraming, /two different Content-Length/, 'and two different ones make the framing ambiguous');
  const expected = 'post'.length + '/v1/completions'.length + 'a=b'.length + 12 + (9 + 2 + 4) + (16 + 4 + 4) + (14 + 2 + 4) + (14 + 1 + 4);
  t.equal(f.headerBytes, expected);
  t.equal(readRequest(req([]), NO_STICKY, newId).declaredLength, -1, 'absent: -1');
  t.equal(readRequest(req(['content-length', '']), NO_STICKY, newId).declaredLength, -1, 'empty: -1');
  t.ok(Number.isNaN(readRequest(req(['content-length', 'abc']), NO_STICKY, newId).declaredLength), 'not a number: NaN');
  t.equal(readRequest(req([]), NO_STICKY, newId).stickyValue, undefined);
});

t.test('head refusals, each alone', async (t) => {
  t.equal(headRefusal(facts(), LIMITS, false), undefined, 'a sound head passes');
  t.equal(headRefusal(facts({ declaredLength: -1 }), LIMITS, false), undefined, 'no Content-Length passes');
  t.equal(headRefusal(facts({ encoding: 'identity' }), LIMITS, false), undefined, 'identity passes');
  t.equal(headRefusal(facts({ encoding: 'IDENTITY' }), LIMITS, false), undefined, 'identity in any case passes');
  t.equal(headRefusal(facts({ headerBytes: 1000, declaredLength: 5000 }), LIMITS, false), undefined, 'limits are inclusive');

  const draining = headRefusal(facts(), LIMITS, true);
  t.match(draining, { error: { status: 503, code: 'shutting_down', retryAfterS: 1 }, closeConnection: false });
  t.match(headRefusal(facts({ headerBytes: 1001 }), LIMITS, false), { error: { status: 431, code: 'headers_too_large' }, closeConnection: false });
  t.match(headRefusal(facts({ declaredLength: 5001 }), LIMITS, false), { error: { status: 413, code: 'request_too_large' }, closeConnection: false });
  t.match(headRefusal(facts({ declaredLength: DISCARD_LIMIT + 1 }), LIMITS, false), { error: { status: 413 }, closeConnection: true }, 'an absurd body is cut');
  t.match(headRefusal(facts({ encoding: 'gzip' }), LIMITS, false), { error: { status: 415, code: 'unsupported_content_encoding' }, closeConnection: false });
  const big = { max_header_bytes: 1000, max_body_bytes: 2 * DISCARD_LIMIT };
  t.match(headRefusal(facts({ encoding: 'br', declaredLength: DISCARD_LIMIT + 1 }), big, false), { error: { status: 415 }, closeConnection: true }, 'a huge compressed body is cut');
  t.match(
    headRefusal(facts({ declaredLength: NaN }), LIMITS, false),
    { error: { status: 400, code: 'invalid_field', param: 'content-length' }, closeConnection: true },
  );
});

t.test('head refusals in order: draining, header size, body size, encoding, Content-Length', async (t) => {
  const all = facts({ headerBytes: 2000, declaredLength: 6000, encoding: 'gzip' });
  t.equal(headRefusal(all, LIMITS, true)?.error.code, 'shutting_down');
  t.equal(headRefusal(all, LIMITS, false)?.error.code, 'headers_too_large');
  t.equal(headRefusal({ ...all, headerBytes: 10 }, LIMITS, false)?.error.code, 'request_too_large');
  t.equal(headRefusal({ ...all, headerBytes: 10, declaredLength: 10 }, LIMITS, false)?.error.code, 'unsupported_content_encoding');
  t.equal(headRefusal(facts({ encoding: 'gzip', declaredLength: NaN }), LIMITS, false)?.error.code, 'unsupported_content_encoding');
  t.equal(headRefusal(facts({ headerBytes: 2000, declaredLength: NaN }), LIMITS, false)?.error.code, 'headers_too_large');
});

const raw = (s: string) => Buffer.from(s);
const DEPTH = 64;

t.test('body checks, each outcome', async (t) => {
  t.match(checkBody('chat', raw(''), DEPTH), { error: { status: 400, code: 'invalid_json', message: /the body is empty/ } });
  t.match(checkBody('chat', raw('{"model":'), DEPTH), { error: { code: 'invalid_json', message: /not valid JSON: / } });
  for (const body of ['[]', 'null', '3', '"s"']) t.match(checkBody('chat', raw(body), DEPTH), { error: { code: 'invalid_body' } }, body);
  for (const body of ['{}', '{"model":""}', '{"model":3}']) t.match(checkBody('chat', raw(body), DEPTH), { error: { code: 'missing_model', param: 'model' } }, body);
  t.match(checkBody('chat', raw('{"model":"m"}'), DEPTH), { error: { code: 'invalid_field', param: 'messages' } });
  t.match(checkBody('completions', raw('{"model":"m"}'), DEPTH), { error: { code: 'invalid_field', param: 'prompt' } });
  t.match(checkBody('chat', raw('{"model":"m","messages":[{"role":"user"}],"stream":"yes"}'), DEPTH), { error: { code: 'invalid_field', param: 'stream' } });
  t.match(checkBody('completions', raw('{"model":"m","prompt":"p","n":0}'), DEPTH), { error: { code: 'invalid_field', param: 'n' } });
  const ok = checkBody('chat', raw('{"model":"m","messages":[{"role":"user","content":"hi"}]}'), DEPTH);
  t.notOk('error' in ok);
  t.match(ok, { model: 'm', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
  t.match(checkBody('completions', raw('{"model":"m","prompt":["a"]}'), DEPTH), { model: 'm' });
});

t.test('body checks in order: JSON, object, model, structure', async (t) => {
  t.equal((checkBody('chat', raw('[{"model":"m"}]'), DEPTH) as { error: { code: string } }).error.code, 'invalid_body');
  t.equal((checkBody('chat', raw('{"model":1,"messages":3}'), DEPTH) as { error: { code: string } }).error.code, 'missing_model');
  t.equal((checkBody('chat', raw('{"model":"m","messages":3,"stream":1}'), DEPTH) as { error: { param: string } }).error.param, 'stream');
});

t.test('upstream headers once the pool is known', async (t) => {
  const plain: Record<string, string> = { 'x-request-id': 'r' };
  addUpstreamHeaders(plain, undefined);
  t.same(plain, { 'x-request-id': 'r', 'content-type': 'application/json' }, 'JSON content type added, no credentials');
  const keyed: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  addUpstreamHeaders(keyed, 'secret');
  t.same(keyed, { 'content-type': 'application/json; charset=utf-8', authorization: 'Bearer secret' }, 'the client\'s type kept, the pool key sent');
});

t.test('nesting is measured on the bytes, before parsing: deeper than the limit is json_too_deep', async (t) => {
  const nested = (depth: number) => `{"model":"m","messages":[{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}]}`;
  // the body itself opens 3 levels ({, [, {) before the content
  t.notOk('error' in checkBody('chat', raw(nested(DEPTH - 3)), DEPTH), 'exactly at the limit passes');
  t.match(checkBody('chat', raw(nested(DEPTH - 2)), DEPTH), { error: { status: 400, code: 'json_too_deep', param: null } });
  t.match(checkBody('chat', raw(nested(5000)), DEPTH), { error: { code: 'json_too_deep' } }, 'thousands of levels');
  t.match(checkBody('chat', raw('['.repeat(100)), DEPTH), { error: { code: 'json_too_deep' } }, 'checked before the JSON is parsed');
  const inString = `{"model":"m","messages":[{"role":"user","content":"${'[{'.repeat(200)}\\\"["}]}`;
  t.notOk('error' in checkBody('chat', raw(inString), DEPTH), 'brackets inside strings (and escaped quotes) do not count');
});

t.test('a key the gateway acts on given twice is refused; other keys are not its business', async (t) => {
  t.match(checkBody('chat', raw('{"model":"a","messages":[{"role":"user"}],"model":"b"}'), DEPTH), { error: { status: 400, code: 'invalid_field', param: 'model', message: /more than once/ } });
  t.match(checkBody('chat', raw('{"model":"a","messages":[{"role":"user"}],"stream":true,"stream":false}'), DEPTH), { error: { param: 'stream' } });
  t.notOk('error' in checkBody('chat', raw('{"model":"a","messages":[{"role":"user"}],"user":"x","user":"y"}'), DEPTH));
});

t.test('an alias rewrite changes the model bytes alone', async (t) => {
  const text = '{"seed": 12345678901234567890, "model" : "alias", "x": 1e400, "k":"caf\u00e9", "messages":[{"role":"user","content":"hi"}]}';
  const valid = checkBody('chat', raw(text), DEPTH);
  if ('error' in valid) throw new Error('refused');
  t.equal(withModel(raw(text), valid, 'real/model"1').toString(), text.replace('"alias"', JSON.stringify('real/model"1')));
});

t.test('framing: one length, or chunked alone; anything else is ambiguous and cuts the connection', async (t) => {
  const framing = (headers: string[]) => readRequest(req(headers), NO_STICKY, newId).badFraming;
  t.equal(framing(['content-length', '5']), undefined);
  t.equal(framing(['content-length', '5', 'content-length', '5']), undefined, 'the same length twice');
  t.equal(framing(['transfer-encoding', 'chunked']), undefined);
  t.equal(framing(['transfer-encoding', ' Chunked ']), undefined, 'case and spaces');
  t.match(framing(['transfer-encoding', 'chunked;q=1']), /only "chunked"/);
  t.match(framing(['transfer-encoding', 'identity, chunked']), /only "chunked"/);
  t.match(framing(['transfer-encoding', 'chunked', 'transfer-encoding', 'chunked']), /only "chunked"/, 'chunked twice');
  t.match(framing(['content-length', '5', 'transfer-encoding', 'chunked']), /both Content-Length and Transfer-Encoding/);
  const facts = readRequest(req(['content-length', '5', 'content-length', '6']), NO_STICKY, newId);
  t.match(headRefusal(facts, LIMITS, false), { error: { code: 'invalid_framing' }, cut: true });
  t.equal(headRefusal(facts, LIMITS, true)?.error.code, 'shutting_down', 'draining first');
  const enc = readRequest(req(['content-encoding', 'gzip', 'content-encoding', 'identity']), NO_STICKY, newId);
  t.equal(headRefusal(enc, LIMITS, false)?.error.code, 'unsupported_content_encoding', 'a coding on any Content-Encoding line counts');
});

t.test('a UTF-8 byte-order mark before the JSON is accepted, and the alias rewrite keeps it', async (t) => {
  const text = '{"model":"a","messages":[{"role":"user","content":"x"}]}';
  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
  const valid = checkBody('chat', withBom, DEPTH);
  if ('error' in valid) throw new Error(`refused: ${valid.error.message}`);
  t.equal(valid.model, 'a');
  t.same(withModel(withBom, valid, 'b'), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text.replace('"a"', '"b"'))]));
});
