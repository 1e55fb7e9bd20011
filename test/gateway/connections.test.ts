// Connection bounds on the client port: limits.max_connections and max_connections_per_client refuse a
// request beyond them with 503 too_many_connections (Retry-After, Connection: close), counted in
// infergate_rejected_total and shown by infergate_open_connections; the admin port answers all along; and
// at the process's file-descriptor limit the client port stops accepting instead of spinning, and takes
// connections again once descriptors are free. Real gateway processes, raw sockets, undici.
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { gatewayConfig, runCli, startGateway, tempDir, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody, type TestUpstream } from '../helpers/upstream.js';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { spawn } from 'node:child_process';

/** An upstream that holds every inference request until `release()`; the gateway's polling gets 404. */
async function holdingUpstream(): Promise<TestUpstream & { release(): void }> {
  const held: Array<() => void> = [];
  const up = await startUpstream((_req, res) => {
    held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
  });
  return Object.assign(up, { release: () => held.splice(0).forEach((f) => f()) });
}

/** A raw connection that sends one whole chat request and does not wait for its answer. */
function heldRequest(url: string, localAddress?: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const body = chatBody();
  return new Promise((resolve, reject) => {
    const sock = connect({ host: hostname, port: Number(port), localAddress }, () => {
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      resolve(sock);
    });
    sock.on('error', reject);
  });
}

async function metric(adminUrl: string, re: RegExp): Promise<number> {
  const res = await request(`${adminUrl}/metrics`);
  const text = await res.body.text();
  const m = re.exec(text);
  return m ? Number(m[1]) : 0;
}

const OPEN = /^infergate_open_connections (\d+)$/m;
const REFUSED = /^infergate_rejected_total\{reason="too_many_connections",pool=""\} (\d+)$/m;

t.test('beyond max_connections a request is refused with 503 and its connection closed; the admin port answers', async (t) => {
  const up = await holdingUpstream();
  const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_connections: 3 } } }));
  const socks: Socket[] = [];
  t.teardown(async () => {
    for (const s of socks) s.destroy();
    await gw.stop();
    await up.close();
  });
  for (let i = 0; i < 3; i++) socks.push(await heldRequest(gw.url));
  await until(async () => (await metric(gw.adminUrl, OPEN)) === 3, 10_000, 'three connections counted');
  await until(() => up.received.length === 3, 10_000, 'the three requests reached the upstream');

  const refused = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(refused.statusCode, 503);
  t.equal(refused.headers['retry-after'], '1');
  t.equal(refused.headers.connection, 'close', 'the refused connection is closed');
  const body = (await refused.body.json()) as { error: { code: string; type: string } };
  t.equal(body.error.code, 'too_many_connections');
  t.equal(body.error.type, 'server_error');
  const models = await request(`${gw.url}/v1/models`);
  t.equal(models.statusCode, 503, 'a GET on the full port is refused too');
  await models.body.text();

  const health = await request(`${gw.adminUrl}/healthz`);
  t.equal(health.statusCode, 200, 'the admin port answers while the client port is full');
  await health.body.text();
  t.equal(await metric(gw.adminUrl, REFUSED), 2, 'refusals counted in infergate_rejected_total');
  t.equal(await metric(gw.adminUrl, OPEN), 3, 'the gauge shows the full port');

  for (const s of socks.splice(0)) s.destroy();
  await until(async () => (await metric(gw.adminUrl, OPEN)) === 0, 10_000, 'the closed connections no longer counted');
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const served = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(served.statusCode, 200, 'once they closed, a request is served again');
  t.equal(await served.body.text(), CHAT_JSON);
});

t.test('max_connections_per_client bounds one client address and not the others', async (t) => {
  const up = await holdingUpstream();
  const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_connections_per_client: 2 } } }));
  const socks: Socket[] = [];
  t.teardown(async () => {
    for (const s of socks) s.destroy();
    await gw.stop();
    await up.close();
  });
  // 127.0.0.2 is another client address on the loopback interface
  for (let i = 0; i < 2; i++) socks.push(await heldRequest(gw.url, '127.0.0.2'));
  await until(async () => (await metric(gw.adminUrl, OPEN)) === 2, 10_000, 'two connections counted');
  const third = await heldRequest(gw.url, '127.0.0.2');
  socks.push(third);
  const answer = await new Promise<string>((resolve) => {
    let got = '';
    third.on('data', (d: Buffer) => (got += d.toString('latin1')));
    third.on('close', () => resolve(got));
  });
  t.match(answer, /^HTTP\/1\.1 503 Service Unavailable\r\n/, 'the third from that address is refused');
  t.match(answer, /\r\nConnection: close\r\n/i);
  t.match(answer, /"code":"too_many_connections"/);
  up.behaviour = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const other = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(other.statusCode, 200, 'another address is served');
  await other.body.text();
  up.release();
});

t.test('at the file-descriptor limit the client port stops accepting; the admin port answers; it accepts again after', async (t) => {
  const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
  const dir = tempDir();
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify(gatewayConfig([up.endpoint], { over: { logging: { level: 'info', access_log: false } } })));
  // a hard limit of 200 descriptors (Node raises its soft limit to the hard one, so both are set)
  const proc = runCli(['serve', '--config', file], {}, (args) => spawn('prlimit', ['--nofile=200:200', '--', process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const socks: Socket[] = [];
  t.teardown(async () => {
    for (const s of socks) s.destroy();
    await proc.kill();
    await up.close();
  });
  const [, url] = await proc.waitFor(/^listening on (\S+)$/m);
  const [, adminUrl] = await proc.waitFor(/^admin listening on (\S+)$/m);
  t.match(proc.stdout(), /"max_connections":36\b/, 'the default bound comes from the limit: (200 - 128) / 2');
  const { hostname, port } = new URL(url);
  // Idle connections (no request: invisible to the request count) until the guard steps in.
  let refusedBy = '';
  for (let i = 0; i < 400 && !/no file descriptor left/.test(proc.stdout()); i++) {
    try {
      socks.push(
        await new Promise<Socket>((resolve, reject) => {
          const s = connect(Number(port), hostname, () => resolve(s));
          s.on('error', reject);
        }),
      );
    } catch (err) {
      refusedBy = (err as { code?: string }).code ?? String(err);
      break;
    }
  }
  await proc.waitFor(/no file descriptor left/, 10_000);
  const health = await request(`${adminUrl}/healthz`);
  t.equal(health.statusCode, 200, 'the admin port answers at the limit');
  await health.body.text();
  const refused = await request(`${url}/v1/models`).then(
    (r) => `status ${r.statusCode}`,
    (e: { code?: string; cause?: { code?: string } }) => e.code ?? e.cause?.code ?? 'error',
  );
  t.equal(refused, 'ECONNREFUSED', `a new connection to the client port is refused by the kernel (${refusedBy || 'no connect failed before the log line'})`);
  for (const s of socks.splice(0)) s.destroy();
  await proc.waitFor(/the client port accepts again/, 10_000);
  const served = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(served.statusCode, 200, 'served again once descriptors are free');
  t.equal(await served.body.text(), CHAT_JSON);
});
