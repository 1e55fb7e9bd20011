// Slow clients, and who ended the exchange. uWS 20.30 cuts, with no answer and after 8 to 12 s, a request
// body that arrives slower than about 16 KB/s and a connection whose client takes no byte of its answer;
// the gateway acts first and says so: a slow upload is answered 408 request_timeout, an answer the client
// does not take is ended (upstream request cancelled) with `closed_by: "gateway"` and status 408 in the
// access log, and a client that leaves on its own is logged 499 with `closed_by: "client"`. Real gateway
// process, raw sockets (so the test controls when bytes are sent and read), a real upstream.
import t from 'tap';
import { connect, type Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import { gatewayConfig, startGateway, until, type RunningGateway } from '../helpers/process.js';
import { startUpstream, chatBody } from '../helpers/upstream.js';

interface LogLine {
  msg: string;
  status?: number;
  closed_by?: string;
  why?: string;
}

function logLines(gw: RunningGateway): LogLine[] {
  return gw.proc
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/** The gateway's last log lines, for a failure's message. */
const tail = (gw: RunningGateway) => () => `the gateway's last log lines:\n${gw.proc.stdout().split('\n').slice(-12).join('\n')}${gw.proc.stderr().slice(-1000)}`;

function open(gw: RunningGateway): Promise<Socket> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => resolve(s));
    s.on('error', reject);
  });
}

/** Everything the connection receives until it closes. */
function received(sock: Socket): Promise<string> {
  let got = '';
  sock.on('data', (d: Buffer) => (got += d.toString('latin1')));
  return new Promise((resolve) => sock.on('close', () => resolve(got)));
}

/** An SSE answer that never ends: 64 KB events as fast as the gateway takes them. */
function endlessStream(_req: unknown, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const event = `data: ${'x'.repeat(64 * 1024)}\n\n`;
  const pump = () => {
    while (!res.destroyed && res.write(event));
    if (!res.destroyed) res.once('drain', pump);
  };
  pump();
}

const up = await startUpstream(endlessStream);
const gw = await startGateway(
  gatewayConfig([up.endpoint], { over: { logging: { level: 'info', access_log: true }, limits: { client_stall_timeout: '2s' } } }),
);
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

t.test('a request body slower than uWS allows is answered 408 before uWS would cut it', async (t) => {
  const sock = await open(gw);
  const answer = received(sock);
  sock.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"model":"test-model",');
  const text = await answer; // closed by the gateway after its answer
  t.match(text, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  t.match(text, /\r\nConnection: close\r\n/i);
  t.match(text, /"code":"request_timeout"/);
  const line = await until(() => logLines(gw).find((l) => l.msg === 'request' && l.status === 408), 5_000, 'the access-log line', tail(gw));
  t.equal(line.closed_by, 'gateway');
  t.equal(up.received.length, 0, 'nothing reached the upstream');
});

t.test('a client that does not read its stream: the gateway ends it after client_stall_timeout and says so', async (t) => {
  const before = up.received.length;
  const sock = await open(gw);
  const done = received(sock);
  sock.pause(); // reads nothing from now on
  const body = chatBody({ stream: true });
  sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  const warn = await until(() => logLines(gw).find((l) => l.msg.startsWith('client stalled')), 60_000, 'the stall log line', tail(gw));
  t.match(warn.why, /client_stall_timeout/, 'the reason names the limit');
  const line = await until(() => logLines(gw).find((l) => l.msg === 'request' && l.status === 408 && l.closed_by === 'gateway' && l !== undefined), 5_000, 'the access-log line', tail(gw));
  t.equal(line.closed_by, 'gateway', 'the access log says the gateway closed it (not 499)');
  await until(() => up.received.length > before && up.received[before].closedEarly, 5_000, 'the upstream request cancelled');
  sock.resume();
  await done;
  t.pass('the client connection is closed');
});

t.test('a client that leaves mid-stream is logged 499, closed by the client', async (t) => {
  const before = up.received.length;
  const sock = await open(gw);
  const body = chatBody({ stream: true });
  sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  await new Promise((resolve) => sock.once('data', resolve));
  sock.destroy();
  const line = await until(() => logLines(gw).find((l) => l.msg === 'request' && l.status === 499), 5_000, 'the access-log line', tail(gw));
  t.equal(line.closed_by, 'client');
  await until(() => up.received.length > before && up.received[before].closedEarly, 5_000, 'the upstream request cancelled');
});

t.test('with a long client_stall_timeout, a client that takes no byte is ended before uWS would cut it', async (t) => {
  const patient = await startGateway(
    gatewayConfig([up.endpoint], { over: { logging: { level: 'info', access_log: true }, limits: { client_stall_timeout: '10m' } } }),
  );
  t.teardown(() => patient.stop());
  const sock = await open(patient);
  const done = received(sock);
  sock.pause();
  const body = chatBody({ stream: true });
  sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  const line = await until(() => logLines(patient).find((l) => l.msg === 'request'), 20_000, 'the access-log line', tail(patient));
  t.equal(line.status, 408, 'not 499: uWS did not get to cut it first');
  t.equal(line.closed_by, 'gateway');
  t.match(logLines(patient).find((l) => l.msg.startsWith('client stalled'))?.why, /took no byte/);
  sock.resume();
  await done;
});
