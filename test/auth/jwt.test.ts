// auth.mode jwt against the attacks of RFC 8725 and the bugs JWT libraries have had, through a real
// gateway process, with a real upstream (node:http) that records what reaches it. Each hostile token is
// refused with the status a client should see, the body names the category only (never the token), and
// nothing reaches the model server.
import t from 'tap';
import { request } from 'undici';
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import { KeyObject, sign } from 'node:crypto';
import { join } from 'node:path';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, base64url, type CryptoKey, type JWK } from 'jose';
import { startGateway, gatewayConfig, tempDir, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';
import { scrape, metric } from '../e2e/support.js';

const ISS = 'https://issuer.test';
const AUD = 'infergate';
const rsa = await generateKeyPair('RS256', { extractable: true });
const ec = await generateKeyPair('ES256', { extractable: true });
const attacker = await generateKeyPair('ES256', { extractable: true });
const jwks = { keys: [{ ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' }, { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' }] };
const dir = tempDir();
writeFileSync(join(dir, 'jwks.json'), JSON.stringify(jwks));

// A key server an attacker controls, for jku/x5u: it must never be asked.
let attackerHits = 0;
const evil = createServer(async (_req, res) => {
  attackerHits++;
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [{ ...(await exportJWK(attacker.publicKey)), kid: 'evil', alg: 'ES256' }] }));
});
await new Promise<void>((r) => evil.listen(0, '127.0.0.1', () => r()));
const evilUrl = `http://127.0.0.1:${(evil.address() as { port: number }).port}/jwks.json`;

const up = await startUpstream((_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json', 'x-mock-endpoint': 'pod-7', server: 'uvicorn' }).end(CHAT_JSON),
);
const gw = await startGateway(
  gatewayConfig([up.endpoint], {
    over: {
      debug_headers: false,
      auth: {
        mode: 'jwt',
        jwt: { jwks_file: join(dir, 'jwks.json'), issuer: ISS, audience: AUD, algorithms: ['RS256', 'ES256'], clock_skew: '0s' },
      },
    },
  }),
);
t.teardown(async () => {
  await gw.stop();
  await up.close();
  await new Promise((r) => evil.close(r));
});

const now = () => Math.floor(Date.now() / 1000);

interface Opts {
  header?: Record<string, unknown>;
  key?: CryptoKey | Uint8Array;
  claims?: Record<string, unknown>;
  /** claims to leave out of the defaults */
  drop?: string[];
}

/** A token: by default ES256 with kid ec-1, every model, valid for an hour. */
async function token(o: Opts = {}): Promise<string> {
  const claims: Record<string, unknown> = { sub: 'tenant-a', iss: ISS, aud: AUD, iat: now(), exp: now() + 3600, models: ['*'], ...o.claims };
  for (const c of o.drop ?? []) delete claims[c];
  const header = { alg: 'ES256', kid: 'ec-1', ...o.header };
  return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(o.key ?? ec.privateKey);
}

/** A token assembled by hand (for what jose would refuse to sign). */
function raw(header: unknown, claims: unknown, signature = 'c2ln'): string {
  const b = (v: unknown) => base64url.encode(JSON.stringify(v));
  return `${b(header)}.${b(claims)}.${signature}`;
}

/** ES256 over any header, signed with the set's own EC key (jose refuses to sign an unknown crit). */
function signedRaw(header: Record<string, unknown>, claims: Record<string, unknown>): string {
  const input = `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(claims))}`;
  const sig = sign('sha256', Buffer.from(input), { key: KeyObject.from(ec.privateKey as unknown as globalThis.CryptoKey), dsaEncoding: 'ieee-p1363' });
  return `${input}.${base64url.encode(sig)}`;
}

async function call(authorization: string | undefined, body = chatBody(), extra: Record<string, string> = {}) {
  const before = up.received.length;
  const res = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...(authorization !== undefined && { authorization }), ...extra },
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, reached: up.received.length - before };
}

async function refused(t: Tap.Test, what: string, tok: string, category: RegExp | string) {
  const r = await call(`Bearer ${tok}`);
  t.equal(r.status, 401, `${what}: 401`);
  const err = (JSON.parse(r.text) as { error: { code: string; message: string } }).error;
  t.equal(err.code, 'invalid_token', `${what}: code invalid_token`);
  t.match(err.message, category, `${what}: says "${err.message}"`);
  t.match(String(r.headers['www-authenticate']), /^Bearer realm="infergate", error="invalid_token"/, `${what}: WWW-Authenticate with error`);
  const sig = tok.split('.')[2] ?? tok;
  if (sig.length > 8) t.notOk(r.text.includes(sig) || String(r.headers['www-authenticate']).includes(sig), `${what}: the token is not echoed`);
  t.equal(r.reached, 0, `${what}: nothing reached the model server`);
}

// tap's Test type without importing tap's internals by name
declare namespace Tap {
  type Test = Parameters<Parameters<typeof t.test>[1]>[0];
}

t.test('a valid token: 200, and the model server sees neither the token nor the client\'s forwarding claims', async (t) => {
  const tok = await token({ claims: { models: ['test-model'] } });
  const r = await call(`Bearer ${tok}`, chatBody(), { 'x-forwarded-for': '6.6.6.6', 'x-real-ip': '6.6.6.6' });
  t.equal(r.status, 200);
  t.equal(r.text, CHAT_JSON);
  const rec = up.received.at(-1)!;
  t.equal(rec.headers.authorization, undefined, 'the client\'s Authorization is not forwarded');
  t.equal(rec.headers['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For is the peer, the client\'s claim dropped');
  t.equal(rec.headers['x-forwarded-proto'], 'http');
  t.equal(rec.headers['x-real-ip'], undefined);
  t.equal(r.headers['x-mock-endpoint'], undefined, 'no upstream debug header without debug_headers');
  t.equal(r.headers.server, undefined, 'no upstream server header');
  t.equal(r.headers.uwebsockets, undefined, 'no uWebSockets header');
  const again = await call(`bearer ${tok}`);
  t.equal(again.status, 200, 'the scheme is case-insensitive; the second use is served from the cache');
  const rsaTok = await token({ header: { alg: 'RS256', kid: 'rsa-1' }, key: rsa.privateKey });
  t.equal((await call(`Bearer ${rsaTok}`)).status, 200, 'RS256 with the RSA key of the set');
});

t.test('no token, or another scheme: 401 missing_token with a bare challenge (RFC 6750 §3.1)', async (t) => {
  for (const auth of [undefined, 'Basic dXNlcjpwYXNz', '']) {
    const r = await call(auth);
    t.equal(r.status, 401, `${JSON.stringify(auth)}: 401`);
    t.equal(JSON.parse(r.text).error.code, 'missing_token');
    t.equal(r.headers['www-authenticate'], 'Bearer realm="infergate"', 'no error attribute when no token was sent');
    t.equal(r.reached, 0);
  }
});

t.test('alg "none" and algorithms the config does not list', async (t) => {
  const claims = { sub: 'x', iss: ISS, aud: AUD, exp: now() + 600, models: ['*'] };
  await refused(t, 'alg none, empty signature', raw({ alg: 'none' }, claims, ''), /malformed|unsupported algorithm/);
  await refused(t, 'alg none with a signature', raw({ alg: 'none' }, claims), /unsupported algorithm/);
  await refused(t, 'alg NONE', raw({ alg: 'NONE', kid: 'ec-1' }, claims), /unsupported algorithm/);
  const es384 = await generateKeyPair('ES384');
  await refused(t, 'ES384 (not listed)', await token({ header: { alg: 'ES384' }, key: es384.privateKey }), /unsupported algorithm/);
});

t.test('key confusion: HS256 signed with the RSA public key as the secret', async (t) => {
  const pem = await exportSPKI(rsa.publicKey);
  for (const secret of [pem, JSON.stringify(jwks.keys[0]), base64url.encode(pem)]) {
    await refused(t, 'HS256 with the public key', await token({ header: { alg: 'HS256', kid: 'rsa-1' }, key: new TextEncoder().encode(secret) }), /unsupported algorithm/);
  }
});

t.test('kid values: unknown, injected, not a string', async (t) => {
  await refused(t, 'unknown kid', await token({ header: { kid: 'nope' } }), /unknown key/);
  await refused(t, 'path traversal kid', await token({ header: { kid: '../../../../dev/null' } }), /unknown key/);
  await refused(t, 'SQL-looking kid', await token({ header: { kid: "x' UNION SELECT 'secret' --" } }), /unknown key/);
  await refused(t, 'a very long kid', await token({ header: { kid: 'k'.repeat(300) } }), /malformed/);
  await refused(t, 'numeric kid', await token({ header: { kid: 1 } }), /malformed/);
  await refused(t, 'object kid', await token({ header: { kid: { $ne: null } } }), /malformed/);
  await refused(t, 'empty kid', await token({ header: { kid: '' } }), /malformed/);
  await refused(t, 'RSA kid on an EC token', await token({ header: { kid: 'rsa-1' } }), /unknown key/);
});

t.test('embedded jwk, jku, x5u, x5c: never used to find a key', async (t) => {
  const attackerJwk: JWK = { ...(await exportJWK(attacker.publicKey)), alg: 'ES256' };
  const signed = (header: Record<string, unknown>) => token({ header, key: attacker.privateKey });
  await refused(t, 'jwk header, no kid', await signed({ kid: undefined, jwk: attackerJwk }), /bad signature/);
  await refused(t, 'jwk header with the set\'s kid', await signed({ jwk: attackerJwk }), /bad signature/);
  await refused(t, 'jku to the attacker\'s key set', await signed({ kid: 'evil', jku: evilUrl }), /unknown key/);
  await refused(t, 'x5u to the attacker', await signed({ kid: 'evil', x5u: evilUrl }), /unknown key/);
  await refused(t, 'x5c', await signed({ x5c: ['MIIB'] }), /bad signature/);
  t.equal(attackerHits, 0, 'the attacker\'s key server was never asked');
});

t.test('claims: exp, nbf, iat, iss, aud, and the tenant', async (t) => {
  await refused(t, 'expired', await token({ claims: { exp: now() - 5 } }), /expired/);
  await refused(t, 'nbf in the future', await token({ claims: { nbf: now() + 120 } }), /not yet valid/);
  await refused(t, 'iat in the future', await token({ claims: { iat: now() + 120 } }), /not yet valid/);
  await refused(t, 'no exp', await token({ drop: ['exp'] }), /missing claim exp/);
  await refused(t, 'exp not a number', await token({ claims: { exp: 'tomorrow' } }), /malformed/);
  await refused(t, 'wrong issuer', await token({ claims: { iss: 'https://evil.test' } }), /wrong issuer/);
  await refused(t, 'no issuer', await token({ drop: ['iss'] }), /missing claim iss/);
  await refused(t, 'wrong audience', await token({ claims: { aud: 'someone-else' } }), /wrong audience/);
  await refused(t, 'no tenant', await token({ drop: ['sub'] }), /no "sub" claim/);
  t.equal((await call(`Bearer ${await token({ claims: { aud: ['other', AUD] } })}`)).status, 200, 'an audience list that holds ours');
});

t.test('crit headers, bad signatures and malformed tokens', async (t) => {
  const claims = { sub: 'tenant-a', iss: ISS, aud: AUD, exp: now() + 600, models: ['*'] };
  t.equal((await call(`Bearer ${signedRaw({ alg: 'ES256', kid: 'ec-1' }, claims)}`)).status, 200, 'the hand signer makes good tokens');
  await refused(t, 'unknown crit', signedRaw({ alg: 'ES256', kid: 'ec-1', crit: ['x-must-know'], 'x-must-know': 1 }, claims), /unsupported critical header/);
  await refused(t, 'b64 false (RFC 7797) in a JWT', signedRaw({ alg: 'ES256', kid: 'ec-1', crit: ['b64'], b64: false }, claims), /malformed|bad signature/);
  const good = await token();
  const [h, p, s] = good.split('.');
  await refused(t, 'a payload changed after signing', `${h}.${base64url.encode(JSON.stringify({ sub: 'admin', iss: ISS, aud: AUD, exp: now() + 3600, models: ['*'] }))}.${s}`, /bad signature/);
  await refused(t, 'a signature from another token', `${h}.${p}.${(await token({ claims: { sub: 'other' } })).split('.')[2]}`, /bad signature/);
  await refused(t, 'a truncated signature', `${h}.${p}.${s.slice(0, 20)}`, /bad signature|malformed/);
  for (const [what, tok] of [
    ['one segment', 'abcdef'],
    ['two segments', `${h}.${p}`],
    ['four segments', `${h}.${p}.${s}.x`],
    ['a JWE (five segments)', `${h}.a.b.c.d`],
    ['bad base64 characters', `${h}.${p}.!!!`],
    ['a header that is not JSON', `${base64url.encode('not json')}.${p}.${s}`],
    ['a header that is JSON but not an object', `${base64url.encode('[1]')}.${p}.${s}`],
    ['a payload that is not JSON', `${h}.${base64url.encode('{"sub":')}.${s}`],
    ['spaces inside', `${h} .${p}.${s}`],
  ] as const) {
    await refused(t, what, tok, /malformed|bad signature/);
  }
  const r = await call(`Bearer ${good}, Bearer ${good}`);
  t.equal(r.status, 401, 'two tokens in one header: 401');
});

t.test('a token over the header limit: 431', async (t) => {
  // over the 16 KiB default, within twice it: past that uWS refuses the head by itself (src/common/uws.ts)
  const big = await token({ claims: { models: Array.from({ length: 800 }, (_, i) => `model-number-${i}`) } });
  t.ok(big.length > 16 * 1024 && big.length < 30 * 1024, `${big.length} bytes`);
  const r = await call(`Bearer ${big}`);
  t.equal(r.status, 431);
  t.equal(JSON.parse(r.text).error.code, 'headers_too_large');
  t.equal(r.reached, 0);
});

t.test('models: a model the token may not use is 403, for an alias too when its target is not allowed', async (t) => {
  const body = (model: string) => chatBody({ model });
  const only = await token({ claims: { models: ['other-*'] } });
  let r = await call(`Bearer ${only}`, body('test-model'));
  t.equal(r.status, 403);
  t.same(JSON.parse(r.text).error, { message: 'The token does not allow the model "test-model".', type: 'invalid_request_error', param: 'model', code: 'model_not_allowed' });
  t.equal(r.headers['www-authenticate'], undefined, 'a 403 carries no challenge');
  t.equal(r.reached, 0);
  const aliasOnly = await token({ claims: { models: ['alias'] } });
  r = await call(`Bearer ${aliasOnly}`, body('alias'));
  t.equal(r.status, 403, 'the alias is allowed, its target is not');
  t.match(JSON.parse(r.text).error.message, /"test-model"/);
  const both = await token({ claims: { models: ['alias', 'test-*'] } });
  t.equal((await call(`Bearer ${both}`, body('alias'))).status, 200, 'alias and target allowed (by pattern)');
  const none = await token({ drop: ['models'] });
  t.equal((await call(`Bearer ${none}`)).status, 403, 'no models claim: no model');
  t.equal((await call(`Bearer ${only}`, body('no-such-model'))).status, 404, 'an unknown model is still 404');
});

t.test('GET /v1/models needs a token and lists the models it allows', async (t) => {
  const list = async (authorization?: string) => {
    const res = await request(`${gw.url}/v1/models`, { headers: authorization ? { authorization } : {} });
    const body = (await res.body.json()) as { data?: Array<{ id: string }>; error?: { code: string } };
    return { status: res.statusCode, challenge: res.headers['www-authenticate'], ids: body.data?.map((m) => m.id).sort(), code: body.error?.code };
  };
  t.match(await list(), { status: 401, code: 'missing_token', challenge: 'Bearer realm="infergate"' });
  t.match(await list('Bearer not.a.token'), { status: 401, code: 'invalid_token' });
  t.same((await list(`Bearer ${await token()}`)).ids, ['alias', 'test-model'], '"*": every model');
  t.same((await list(`Bearer ${await token({ claims: { models: ['test-*'] } })}`)).ids, ['test-model'], 'only what the token allows');
  const head = await request(`${gw.url}/v1/models`, { method: 'HEAD' });
  await head.body.text();
  t.equal(head.statusCode, 401, 'HEAD too');
});

t.test('a cached token is served only until its exp', async (t) => {
  const tok = await token({ claims: { exp: now() + 2 } });
  t.equal((await call(`Bearer ${tok}`)).status, 200);
  await until(async () => (await call(`Bearer ${tok}`)).status === 401, 10_000, 'the token to expire');
  const r = await call(`Bearer ${tok}`);
  t.match(JSON.parse(r.text).error.message, /expired/);
});

t.test('refusals are counted by reason; infergate_auth_disabled is 0', async (t) => {
  const m = await scrape(gw.adminUrl);
  t.ok(metric(m, 'infergate_rejected_total', { reason: 'unauthorized' }) >= 30, 'unauthorized');
  t.ok(metric(m, 'infergate_rejected_total', { reason: 'forbidden' }) >= 3, 'forbidden');
  t.equal(metric(m, 'infergate_auth_disabled'), 0);
  t.match(gw.proc.stdout() + gw.proc.stderr(), /^(?![^]*auth\.mode is "none")/, 'no warning about auth being off');
});
