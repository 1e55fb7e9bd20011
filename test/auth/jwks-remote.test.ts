// auth.jwt.jwks_url against a real local key server that goes down, becomes slow and comes back: keys
// already fetched keep working, a key it has not served fails closed (401) within jwks_timeout, unknown
// kids never make a fetch per request, and a client that hangs up while its token waits on the key server
// leaves nothing behind.
import t from 'tap';
import { request } from 'undici';
import { createServer, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';
import { scrape, metric } from '../e2e/support.js';

const ISS = 'https://issuer.test';
const AUD = 'infergate';
const k1 = await generateKeyPair('ES256', { extractable: true });
const k2 = await generateKeyPair('ES256', { extractable: true });
const jwk1 = { ...(await exportJWK(k1.publicKey)), kid: 'k1', alg: 'ES256' };
const jwk2 = { ...(await exportJWK(k2.publicKey)), kid: 'k2', alg: 'ES256' };

// the key server: its mode and key set are changed by the tests; it counts what it was asked
let mode: 'ok' | 'down' | 'slow' = 'ok';
let served = [jwk1];
let fetches = 0;
const hanging = new Set<ServerResponse>();
const keyServer = createServer((_req, res) => {
  fetches++;
  if (mode === 'down') res.writeHead(503).end();
  else if (mode === 'slow') hanging.add(res); // never answered
  else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: served }));
});
await new Promise<void>((r) => keyServer.listen(0, '127.0.0.1', () => r()));
const jwksUrl = `http://127.0.0.1:${(keyServer.address() as { port: number }).port}/.well-known/jwks.json`;

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const JWKS_TIMEOUT_MS = 400;
const gw = await startGateway(
  gatewayConfig([up.endpoint], {
    over: {
      auth: {
        mode: 'jwt',
        jwt: {
          jwks_url: jwksUrl, issuer: ISS, audience: AUD, algorithms: ['ES256'],
          jwks_refresh: '300ms', jwks_cooldown: '1s', jwks_timeout: `${JWKS_TIMEOUT_MS}ms`,
          cache_entries: 0, // every request looks its key up: the key set is what is tested
        },
      },
    },
  }),
);
t.teardown(async () => {
  await gw.stop();
  await up.close();
  for (const res of hanging) res.destroy();
  keyServer.closeAllConnections();
  await new Promise((r) => keyServer.close(r));
});

async function token(key: CryptoKey, kid: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ models: ['*'] }).setProtectedHeader({ alg: 'ES256', kid }).setSubject('t').setIssuer(ISS).setAudience(AUD).setIssuedAt(now).setExpirationTime(now + 600).sign(key);
}

async function call(tok: string): Promise<{ status: number; message: string }> {
  // the client's own deadline, well past jwks_timeout: a request that waited on the key server for
  // longer than that would fail here instead of answering
  const res = await request(`${gw.url}/v1/chat/completions`, {
    method: 'POST', body: chatBody(), headers: { authorization: `Bearer ${tok}` }, headersTimeout: 5_000, bodyTimeout: 5_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, message: res.statusCode === 200 ? '' : (JSON.parse(text) as { error: { message: string } }).error.message };
}

const t1 = await token(k1.privateKey, 'k1');
const t2 = await token(k2.privateKey, 'k2');

t.test('keys fetched at start verify tokens', async (t) => {
  t.ok(fetches >= 1, 'the key set was fetched at start');
  t.equal((await call(t1)).status, 200);
});

t.test('key server down: known keys keep working (stale while it revalidates), a new kid fails closed', async (t) => {
  mode = 'down';
  served = [jwk1, jwk2]; // k2 exists now, but the server cannot say so
  const before = fetches;
  // past jwks_refresh, a request starts a background refresh (it fails); k1 goes on being accepted
  const statuses: number[] = [];
  await until(async () => {
    statuses.push((await call(t1)).status);
    return fetches > before;
  }, 5_000, 'a refresh try against the down server');
  for (let i = 0; i < 5; i++) statuses.push((await call(t1)).status);
  t.ok(statuses.every((s) => s === 200), `the known key: ${statuses.length} requests, all 200, before and after the failed refresh`);
  const r = await call(t2);
  t.equal(r.status, 401, 'a kid the cached set does not hold: 401');
  t.match(r.message, /unknown key/);
});

t.test('unknown kids never make a fetch per request', async (t) => {
  const bogus = await Promise.all(Array.from({ length: 20 }, (_, i) => token(k2.privateKey, `bogus-${i}`)));
  const before = fetches;
  const started = Date.now();
  const answers = await Promise.all(bogus.map((b) => call(b)));
  const cooldowns = Math.ceil((Date.now() - started) / 1000); // jwks_cooldown is 1s
  t.ok(answers.every((a) => a.status === 401), '20 unknown kids: 401 each');
  t.ok(fetches - before <= 1 + cooldowns, `${fetches - before} fetches for 20 requests with unknown kids (at most one per jwks_cooldown: ${1 + cooldowns})`);
});

t.test('key server slow: known keys are not held up; a new kid waits at most jwks_timeout, then 401', async (t) => {
  mode = 'slow';
  for (let i = 0; i < 3; i++) t.equal((await call(t1)).status, 200, 'known key');
  const before = fetches;
  // a kid that forces a fetch once the cooldown allows one: answered 401 within the client's deadline
  await until(async () => {
    const r = await call(await token(k2.privateKey, `rotated-${Date.now()}`));
    t.equal(r.status, 401);
    return fetches > before;
  }, 10_000, 'a fetch to the slow server');
  t.ok(hanging.size > 0, 'the key server is holding a fetch it never answers');
});

t.test('a client that hangs up while its token waits on the key server leaves nothing behind', async (t) => {
  // wait out the cooldown so that this request's unknown kid makes the gateway fetch (and wait)
  const held = hanging.size;
  const requestsBefore = up.received.length;
  const tok = await token(k2.privateKey, `hangup-${Date.now()}`);
  const body = chatBody();
  await until(async () => {
    const sock = connect(Number(new URL(gw.url).port), '127.0.0.1');
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tok}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // as soon as the gateway asks the key server, hang up
    const asked = await until(() => hanging.size > held, 1_500, 'the gateway to ask the key server').then(() => true, () => false);
    sock.destroy();
    return asked;
  }, 10_000, 'a request whose verification waits on the key server');
  // the gateway recorded the hang-up and sent nothing upstream; it still serves
  await until(async () => metric(await scrape(gw.adminUrl), 'infergate_requests_total', { code: '499' }) >= 1, 5_000, 'the 499 to be counted');
  t.equal(up.received.length, requestsBefore, 'nothing reached the model server');
  t.equal((await call(t1)).status, 200, 'the gateway goes on serving');
});

t.test('key server back: the rotated key is fetched and accepted', async (t) => {
  for (const res of hanging) res.destroy();
  hanging.clear();
  mode = 'ok';
  await until(async () => (await call(t2)).status === 200, 10_000, 'k2 to be accepted once the server is back');
  t.equal((await call(t1)).status, 200, 'k1 still');
});
