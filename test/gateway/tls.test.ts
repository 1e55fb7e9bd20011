// listen.tls: the client port speaks HTTPS only, with the configured certificate (bad files: tls-errors.test.ts).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { startGateway, gatewayConfig, tempDir } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const dir = tempDir();
const cert = join(dir, 'tls.crt');
const key = join(dir, 'tls.key');
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', key, '-out', cert, '-days', '1'], { stdio: 'ignore' });

t.test('HTTPS with the configured certificate', async (t) => {
  const up = await startUpstream((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAT_JSON) }).end(CHAT_JSON));
  const gw = await startGateway(gatewayConfig([up.endpoint], { over: { listen: { host: '127.0.0.1', port: 0, tls: { cert, key } } } }));
  const agent = new Agent({ connect: { rejectUnauthorized: false } });
  t.teardown(async () => {
    await agent.close();
    await gw.stop();
    await up.close();
  });
  t.match(gw.url, /^https:\/\/127\.0\.0\.1:\d+$/, 'the listening line says https');
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), dispatcher: agent });
  t.equal(res.statusCode, 200);
  t.equal(await res.body.text(), CHAT_JSON);
  const plain = await request(`${gw.url.replace('https:', 'http:')}/v1/models`).then(
    (r) => `status ${r.statusCode}`,
    (e: Error) => `error ${e.message}`,
  );
  t.match(plain, /^error/, `plain HTTP on the TLS port fails (${plain})`);
  const pem = execFileSync('openssl', ['s_client', '-connect', gw.url.slice('https://'.length), '-servername', 'localhost'], { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
  t.match(pem, /subject=\/?CN ?= ?localhost/, 'the served certificate is ours');
});
