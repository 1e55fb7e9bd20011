// The pure parts of authentication and of what reaches the model server: model grants and their glob
// patterns, identities from claims, jose's errors as categories, peer addresses and trusted proxies, the
// forwarded headers, and the config's auth checks. No sockets.
import t from 'tap';
import { ModelGrant, globMatch, identityOf } from '../../src/auth/claims.js';
import { category } from '../../src/auth/authenticator.js';
import { parseJwks } from '../../src/auth/keys.js';
import { Admission, ANONYMOUS, type AdmissionCheck } from '../../src/gateway/admission.js';
import { addressMatcher, normalizePeer, parseCidr } from '../../src/common/ip.js';
import { addForwardedFor, addUpstreamHeaders, readRequest } from '../../src/gateway/request-checks.js';
import { parseConfigText } from '../../src/config/load.js';
import { errors as joseErrors } from 'jose';
import { errors } from '../../src/openai/errors.js';

t.test('glob patterns: * is any run of characters, / included; everything else is literal', async (t) => {
  t.ok(globMatch('llama-*', 'llama-3.1-8b'));
  t.ok(globMatch('meta-llama/*', 'meta-llama/Llama-3.1-8B-Instruct'));
  t.ok(globMatch('*-lora', 'support-bot-lora'));
  t.ok(globMatch('a*b*c', 'aXXbYYc'));
  t.ok(globMatch('a*', 'a'), 'a star matches nothing too');
  t.notOk(globMatch('llama-*', 'mistral-7b'));
  t.notOk(globMatch('llama.*', 'llamaX3'), 'a dot is a dot, not a regex');
  t.notOk(globMatch('a*b', 'a'));
  // a pattern built to make a backtracking matcher explode finishes (and does not match)
  t.notOk(globMatch(`${'*a'.repeat(200)}b`, 'a'.repeat(300)));
});

t.test('a model grant from the models claim', async (t) => {
  const g = ModelGrant.fromClaim(['exact-model', 'llama-*']);
  t.ok(g.allows('exact-model'));
  t.ok(g.allows('llama-70b'));
  t.notOk(g.allows('exact-model-2'));
  t.ok(ModelGrant.fromClaim('*').allows('anything'), '"*" allows every model');
  t.ok(ModelGrant.fromClaim(['*']).allows('anything'));
  t.ok(ModelGrant.fromClaim('a b,c').allows('c'), 'a space- or comma-separated string, as scopes are');
  for (const bad of [undefined, null, 3, { '*': true }, ['a', 3]]) {
    t.notOk(ModelGrant.fromClaim(bad).allows('a'), `${JSON.stringify(bad)} allows nothing`);
  }
});

t.test('the identity of a verified payload', async (t) => {
  const names = { tenant_claim: 'tenant', models_claim: 'models', priority_claim: 'priority' };
  const id = identityOf({ sub: 's', tenant: 'acme', models: ['m'], priority: 'sheddable', exp: 100 }, names);
  t.match(id, { tenant: 'acme', priority: 'sheddable', expiresAt: 100_000 });
  t.match(identityOf({ tenant: 'acme', priority: 'urgent!!' }, names), { priority: undefined }, 'an unknown priority is ignored');
  t.match(identityOf({ sub: 's' }, names), { problem: /no "tenant" claim/ }, 'no tenant: refused');
  t.match(identityOf({ tenant: 7 }, names), { problem: /no "tenant" claim/ });
});

t.test("jose's errors as the category a client is told", async (t) => {
  const claimErr = (claim: string, reason = 'check_failed') => new joseErrors.JWTClaimValidationFailed('x', {}, claim, reason);
  t.equal(category(new joseErrors.JWTExpired('x', {}, 'exp')), 'expired');
  t.equal(category(claimErr('nbf')), 'not yet valid');
  t.equal(category(claimErr('iss')), 'wrong issuer');
  t.equal(category(claimErr('aud')), 'wrong audience');
  t.equal(category(claimErr('exp', 'missing')), 'missing claim exp');
  t.equal(category(new joseErrors.JWSSignatureVerificationFailed()), 'bad signature');
  t.equal(category(new joseErrors.JWKSNoMatchingKey()), 'unknown key');
  t.equal(category(new joseErrors.JOSEAlgNotAllowed('x')), 'unsupported algorithm');
  t.equal(category(new joseErrors.JOSENotSupported('Extension Header Parameter "x" is not recognized')), 'unsupported critical header');
  t.equal(category(new joseErrors.JWSInvalid('x')), 'malformed');
  t.equal(category(new TypeError('x')), 'malformed');
});

t.test('a key set document: public keys only', async (t) => {
  t.throws(() => parseJwks('{', 'f'), /not JSON/);
  t.throws(() => parseJwks('{"keys": 3}', 'f'), /not a JSON Web Key Set/);
  t.throws(() => parseJwks('{"keys": [{"kty":"EC","d":"secret"}]}', 'f'), /private or symmetric/);
  t.throws(() => parseJwks('{"keys": [{"kty":"oct","k":"c2VjcmV0"}]}', 'f'), /private or symmetric/);
  t.same(parseJwks('{"keys": []}', 'f'), { keys: [] });
});

t.test('admission: the requested model and an alias target, then each check in order', async (t) => {
  const identity = { ...ANONYMOUS, models: ModelGrant.fromClaim(['alias', 'm-*']) };
  const req = { identity, model: 'alias', target: 'm-1', pool: 'p', promptTokens: 3 };
  const seen: string[] = [];
  const check = (name: string, verdict: 'ok' | 'no', async = false): AdmissionCheck => ({
    name,
    check: () => {
      seen.push(name);
      const v = verdict === 'no' ? errors.modelNotAllowed(name) : undefined;
      return async ? Promise.resolve(v) : v;
    },
  });
  t.equal(new Admission(undefined).admit(req), undefined, 'alias and target allowed, no checks: admitted');
  t.match(new Admission(undefined).admit({ ...req, target: 'other' }), { code: 'model_not_allowed', message: /"other"/ }, 'a target the token may not use');
  t.match(new Admission(undefined).admit({ ...req, model: 'x', target: 'x' }), { status: 403 });
  const a = new Admission(undefined, [check('one', 'ok'), check('two', 'ok', true), check('three', 'no'), check('four', 'no')]);
  t.match(await a.admit(req), { message: /"three"/ }, 'the first refusal is the answer');
  t.same(seen, ['one', 'two', 'three'], 'checks run in order, an async one included, and stop at a refusal');
  t.equal(new Admission(undefined).authenticate('Bearer whatever'), ANONYMOUS, 'auth off: everyone is anonymous');
});

t.test('peer addresses as uWS gives them, and trusted_proxies', async (t) => {
  t.equal(normalizePeer('0000:0000:0000:0000:0000:ffff:7f00:0001'), '127.0.0.1');
  t.equal(normalizePeer('0000:0000:0000:0000:0000:ffff:0a01:02ff'), '10.1.2.255');
  t.equal(normalizePeer('0000:0000:0000:0000:0000:0000:0000:0001'), '::1');
  t.equal(normalizePeer('2001:0db8:0000:0000:0001:0000:0000:0001'), '2001:db8::1:0:0:1', 'the first longest run of zeros');
  t.equal(normalizePeer('fe80:0000:0000:0000:0abc:0000:0000:0000'), 'fe80::abc:0:0:0', 'the first of two equal runs');
  t.equal(normalizePeer('127.0.0.1'), '127.0.0.1');
  t.same(parseCidr('10.0.0.0/8'), { address: '10.0.0.0', prefix: 8, family: 'ipv4' });
  t.same(parseCidr('::1'), { address: '::1', prefix: 128, family: 'ipv6' });
  for (const bad of ['10.0.0.0/33', '10.0.0/8', 'localhost', '::1/129', '10.0.0.0/x', '']) t.equal(parseCidr(bad), null, bad);
  const trusted = addressMatcher(['10.0.0.0/8', '::1']);
  t.ok(trusted('10.200.1.1'));
  t.ok(trusted('::1'));
  t.notOk(trusted('11.0.0.1'));
  t.notOk(trusted(''));
  t.notOk(addressMatcher([])('10.0.0.1'), 'an empty list trusts nobody');
});

t.test('what the model server is told about the client', async (t) => {
  const head = (headers: string[]) => readRequest({ method: 'POST', url: '/v1/chat/completions', query: '', headers, peer: '' }, new Set(), () => 'id');
  const f = head(['authorization', 'Bearer tok', 'x-forwarded-for', '6.6.6.6', 'x-forwarded-proto', 'https', 'x-real-ip', '6.6.6.6', 'forwarded', 'for=6.6.6.6']);
  t.equal(f.authorization, 'Bearer tok', 'the client\'s Authorization is read');
  t.notOk('authorization' in f.forwarded, '… and not forwarded');
  const untrusted = { ...f.forwarded };
  addForwardedFor(untrusted, '192.0.2.7', false, 'http');
  t.same(untrusted, { 'x-forwarded-for': '192.0.2.7', 'x-forwarded-proto': 'http', 'x-request-id': 'id' }, 'an untrusted peer\'s claims are dropped');
  const trusted = { ...f.forwarded };
  addForwardedFor(trusted, '10.0.0.2', true, 'http');
  t.equal(trusted['x-forwarded-for'], '6.6.6.6, 10.0.0.2', 'a trusted proxy\'s chain is kept, the proxy appended');
  t.equal(trusted['x-forwarded-proto'], 'https', 'and its proto believed');
  t.equal(head(['authorization', 'Bearer a', 'authorization', 'Bearer b']).authorization, 'Bearer a, Bearer b', 'two are one list (refused as malformed)');
  const fwd: Record<string, string> = {};
  addUpstreamHeaders(fwd, 'pool-key', 'Bearer client');
  t.equal(fwd.authorization, 'Bearer client', 'forward_client_auth: the client\'s own');
  const own: Record<string, string> = {};
  addUpstreamHeaders(own, 'pool-key');
  t.equal(own.authorization, 'Bearer pool-key');
});

t.test('config: jwt keys, algorithms and inline secrets', async (t) => {
  const base = (auth: string, pool = '') =>
    `auth:\n${auth}\nmodels: [{name: a, pool: p}]\npools:\n  p:\n    endpoints: ["127.0.0.1:1"]\n${pool}`;
  const problems = (text: string) => {
    const r = parseConfigText(text);
    return r.ok ? [] : r.problems.map((p) => `${p.path}: ${p.message}`);
  };
  const jwt = (extra: string) => `  mode: jwt\n  jwt:\n    issuer: i\n    audience: a\n${extra}`;
  t.same(problems(base(jwt('    jwks_file: k.json\n    algorithms: [ES256]'))), [], 'a complete jwt section');
  t.match(problems(base(jwt('    jwks_file: k.json'))).join('\n'), /auth\.jwt\.algorithms: .*no default/, 'algorithms must be listed');
  t.match(problems(base(jwt('    jwks_file: k.json\n    algorithms: [none]'))).join('\n'), /auth\.jwt\.algorithms\.0: an algorithm is one of/, '"none" is no algorithm');
  t.match(problems(base(jwt('    algorithms: [ES256]'))).join('\n'), /auth\.jwt: give exactly one key source/);
  t.match(problems(base(jwt('    jwks_file: k.json\n    secret_env: S\n    algorithms: [ES256]'))).join('\n'), /exactly one key source .*got jwks_file, secret_env/);
  t.match(problems(base(jwt('    jwks_file: k.json\n    algorithms: [RS256, HS256]'))).join('\n'), /HS256 need secret_file or secret_env/, 'an HMAC beside public keys (key confusion) is refused');
  t.match(problems(base(jwt('    secret_env: S\n    algorithms: [HS256, RS256]'))).join('\n'), /a shared secret verifies HS256\/HS384\/HS512 only/);
  t.match(problems(base(jwt('    secret: hunter2\n    algorithms: [HS256]'))).join('\n'), /auth\.jwt\.secret: a key is not written in the config file: use secret_file or secret_env/);
  t.match(problems(base('  mode: jwt\n  jwt:\n    jwks_file: k.json\n    algorithms: [ES256]')).join('\n'), /issuer/, 'issuer and audience are required');
  const none = '  mode: none\n  allow_unauthenticated: true';
  t.match(problems(base(none, '    api_key: sk-123\n')).join('\n'), /pools\.p\.api_key: a key is not written in the config file: .*api_key_file.*api_key_env/);
  t.match(problems(base(none, '    api_key_env: K\n    forward_client_auth: true\n')).join('\n'), /forward_client_auth/);
  t.match(problems(`trusted_proxies: [10.0.0.0/33]\n${base(none)}`).join('\n'), /trusted_proxies\.0: not an IP address or CIDR/);
  t.same(problems(`trusted_proxies: [10.0.0.0/8, "::1"]\n${base(none)}`), []);
});
