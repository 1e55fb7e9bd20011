// Upstream TLS: a pool of https:// endpoints (the mock behind its own certificate), verified with the pool's
// tls_ca_file; scraped over HTTPS too. Without the CA the request fails 502 with an error that names TLS.
import t from 'tap';
import type { Test } from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { request } from 'undici';
import { runCli, startGateway, gatewayConfig, tempDir, until } from '../helpers/process.js';
import { debugPools } from '../e2e/support.js';
import { makePair } from './support.js';

const dir = tempDir();
const server = makePair(dir, 'model-server', 'model-server.test');

async function httpsMock(t: Test): Promise<string> {
  const p = runCli(['mock', '--port', '0', '--model', 'test-model', '--tls-cert', server.cert, '--tls-key', server.key]);
  t.teardown(() => p.kill());
  const [, endpoint] = await p.waitFor(/^mock listening on https:\/\/(\S+)$/m);
  return endpoint;
}

function chat(stream: boolean): string {
  return JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hello over TLS' }], max_tokens: 8, stream });
}

t.test('a pool of https:// endpoints with tls_ca_file: streamed and scraped over HTTPS', async (t) => {
  const ep = await httpsMock(t);
  const gw = await startGateway(gatewayConfig([`https://${ep}`], { pool: { tls_ca_file: server.cert } }));
  t.teardown(() => gw.stop());
  // the scrape reaches the mock's /metrics over HTTPS: the endpoint gets signals
  const seen = await until(async () => {
    const e = (await debugPools(gw)).p?.endpoints.find((x) => x.endpoint === ep);
    return e?.signals ? e : undefined;
  }, 15_000, 'signals scraped over HTTPS');
  t.equal(seen?.scrape_failures, 0, 'no failed scrape');
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chat(true), headers: { 'content-type': 'application/json' } });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /text\/event-stream/);
  const text = await res.body.text();
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  t.equal(events.at(-1), 'data: [DONE]', 'the stream ends with [DONE]');
  t.ok(events.length > 2, `content events came through (${events.length})`);
  const whole = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chat(false), headers: { 'content-type': 'application/json' } });
  t.equal(whole.statusCode, 200);
  t.equal(((await whole.body.json()) as { object: string }).object, 'chat.completion');
});

t.test('without the CA the request fails 502 naming TLS', async (t) => {
  const ep = await httpsMock(t);
  const gw = await startGateway(gatewayConfig([`https://${ep}`]));
  t.teardown(() => gw.stop());
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chat(true), headers: { 'content-type': 'application/json' } });
  t.equal(res.statusCode, 502);
  const body = (await res.body.json()) as { error: { code: string; message: string; type: string } };
  t.equal(body.error.code, 'upstream_tls_failed');
  t.match(body.error.message, /could not establish TLS with the model server \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE)\).*pools\.p\.tls_ca_file/);
});

t.test('check-config: a tls_ca_file that is not a certificate, an http:// endpoint in an HTTPS pool', async (t) => {
  const file = join(dir, 'bad-ca.yaml');
  writeFileSync(file, stringify(gatewayConfig(['https://127.0.0.1:9', 'http://127.0.0.1:10'], { pool: { tls_ca_file: server.key } })));
  const p = runCli(['check-config', file]);
  t.equal(await p.exited(30_000), 1);
  t.match(p.stderr(), /pools\.p\.endpoints\.1: this pool speaks HTTPS/);
  const file2 = join(dir, 'bad-ca2.yaml');
  writeFileSync(file2, stringify(gatewayConfig(['https://127.0.0.1:9'], { pool: { tls_ca_file: server.key } })));
  const p2 = runCli(['check-config', file2]);
  t.equal(await p2.exited(30_000), 1);
  t.match(p2.stderr(), /pools\.p\.tls_ca_file: \S*model-server\.key: holds no PEM certificate/);
});
