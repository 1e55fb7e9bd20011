// What reaches the model server, and what comes back, through real gateway processes: the pool's key
// from a file, the client's own Authorization only with forward_client_auth, X-Forwarded-For/Proto
// believed only from trusted_proxies, debug headers only with debug_headers; and auth.mode none says so.
import t from 'tap';
import { request } from 'undici';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startGateway, gatewayConfig, runCli, tempDir } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';
import { scrape, metric } from '../e2e/support.js';

const up = await startUpstream((_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json', 'x-mock-endpoint': 'pod-3', server: 'uvicorn' }).end(CHAT_JSON),
);
t.teardown(() => up.close());
const dir = tempDir();

async function post(url: string, headers: Record<string, string>) {
  const res = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers });
  await res.body.text();
  return { status: res.statusCode, headers: res.headers, seen: up.received.at(-1)!.headers };
}

t.test('the pool key from api_key_file replaces the client\'s token; untrusted forwarding claims are replaced', async (t) => {
  const keyFile = join(dir, 'pool.key');
  writeFileSync(keyFile, 'file-key\n');
  const gw = await startGateway(gatewayConfig([up.endpoint], { pool: { api_key_file: keyFile }, over: { debug_headers: false } }));
  t.teardown(() => gw.stop());
  const r = await post(gw.url, { authorization: 'Bearer client-secret', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https', forwarded: 'for=203.0.113.9' });
  t.equal(r.status, 200);
  t.equal(r.seen.authorization, 'Bearer file-key', 'the pool\'s key (its trailing newline dropped), not the client\'s');
  t.equal(r.seen['x-forwarded-for'], '127.0.0.1', 'the peer, not what the client claimed');
  t.equal(r.seen['x-forwarded-proto'], 'http', 'this listener\'s scheme');
  t.equal(r.seen.forwarded, undefined);
  t.equal(r.headers['x-mock-endpoint'], undefined, 'the upstream\'s debug header is dropped');
  t.equal(r.headers.server, undefined, 'and its server header');
  t.equal(r.headers['x-infergate-endpoint'], undefined);
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_auth_disabled'), 1, 'auth.mode none: infergate_auth_disabled 1');
  t.match(gw.proc.stdout() + gw.proc.stderr(), /auth\.mode is \\?"none\\?"/, 'and a warning at start');
});

t.test('forward_client_auth and a trusted proxy: the client\'s Authorization and forwarding chain go on', async (t) => {
  const gw = await startGateway(gatewayConfig([up.endpoint], { pool: { forward_client_auth: true }, over: { trusted_proxies: ['127.0.0.0/8'] } }));
  t.teardown(() => gw.stop());
  const r = await post(gw.url, { authorization: 'Bearer client-secret', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https' });
  t.equal(r.seen.authorization, 'Bearer client-secret');
  t.equal(r.seen['x-forwarded-for'], '203.0.113.9, 127.0.0.1', 'the chain kept, the proxy appended');
  t.equal(r.seen['x-forwarded-proto'], 'https', 'the proxy\'s scheme believed');
  t.equal(r.headers['x-mock-endpoint'], 'pod-3', 'debug_headers: the upstream\'s header passes');
  const plain = await post(gw.url, {});
  t.equal(plain.seen.authorization, undefined, 'no client Authorization, none sent');
  t.equal(plain.seen['x-forwarded-for'], '127.0.0.1');
});

t.test('a missing pool key stops the start, naming where it was looked for', async (t) => {
  const file = join(dir, 'nokey.yaml');
  writeFileSync(file, stringify(gatewayConfig([up.endpoint], { pool: { api_key_env: 'INFERGATE_TEST_NO_SUCH_VAR' } })));
  const p = runCli(['serve', '--config', file]);
  t.equal(await p.exited(), 1);
  t.notMatch(p.stdout(), /listening/);
  t.match(p.stderr(), /pools\.p\.api_key: the environment variable INFERGATE_TEST_NO_SUCH_VAR is not set or empty/);
});

t.test('jwt with a key file that cannot be read stops the start too', async (t) => {
  const file = join(dir, 'nojwks.yaml');
  const auth = { mode: 'jwt', jwt: { jwks_file: 'missing-jwks.json', issuer: 'i', audience: 'a', algorithms: ['ES256'] } };
  writeFileSync(file, stringify(gatewayConfig([up.endpoint], { over: { auth } })));
  const p = runCli(['serve', '--config', file]);
  t.equal(await p.exited(), 1);
  t.match(p.stderr(), new RegExp(`auth\\.jwt\\.jwks_file: cannot read ${join(dir, 'missing-jwks.json').replace(/[.]/g, '\\.')} \\(ENOENT\\)`), 'a relative path is read from the config file\'s directory');
});
