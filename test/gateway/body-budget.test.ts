// Request bodies through a real gateway: a body in one-byte chunks arrives whole, and request bodies share
// one budget (`limits.max_buffered_body_bytes`), those being received and those of requests in flight
// (kept until their answers end): the request that would pass it gets a 503 with Retry-After, and a
// client that leaves with its body half-sent gives its share back at once.
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON } from '../helpers/upstream.js';
import type { ServerResponse } from 'node:http';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_body_bytes: '1mb', max_buffered_body_bytes: '64kb' } } }));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});
const { hostname, port } = new URL(gw.url);

/** A chat body of exactly `size` bytes. */
function bodyOf(size: number): Buffer {
  const head = '{"model":"test-model","messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail);
}

interface Conn {
  sock: Socket;
  /** what the gateway has answered so far, as text */
  answer(): string;
}

function open(head: string): Promise<Conn> {
  return new Promise((resolve, reject) => {
    let text = '';
    const sock = connect(Number(port), hostname, () => {
      sock.write(head);
      resolve({ sock, answer: () => text });
    });
    sock.on('data', (d: Buffer) => (text += d.toString('latin1')));
    sock.on('error', reject);
  });
}

/** The gateway's own count of bytes held by bodies being received. */
async function buffered(): Promise<number> {
  const text = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  return Number(/^infergate_request_body_buffered_bytes (\d+)/m.exec(text)?.[1] ?? NaN);
}

const headFor = (length: number) =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

t.test('a body sent in one-byte chunks (chunked encoding) arrives whole', async (t) => {
  const body = bodyOf(20_000);
  const conn = await open('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
  const before = up.received.length;
  // one byte per chunk, written in batches so the test does not take a syscall per byte
  for (let i = 0; i < body.length; i += 1000) {
    let batch = '';
    for (const b of body.subarray(i, i + 1000)) batch += `1\r\n${String.fromCharCode(b)}\r\n`;
    conn.sock.write(batch);
  }
  conn.sock.write('0\r\n\r\n');
  await until(() => /^HTTP\/1\.1 \d+/.test(conn.answer()), 10_000, 'the answer');
  t.match(conn.answer(), /^HTTP\/1\.1 200 /);
  t.equal(up.received.length, before + 1);
  t.equal(up.received[before].body, body.toString(), 'the model server got the body byte for byte');
  conn.sock.destroy();
});

t.test('the request that would pass the shared budget is a 503 with Retry-After; a leaver gives its share back', async (t) => {
  // A: 40,000 of 200,000 bytes sent, then it waits: its buffer grows to 64 KiB, the whole budget
  const a = await open(headFor(200_000));
  a.sock.write(bodyOf(200_000).subarray(0, 40_000));
  t.equal(await until(async () => ((await buffered()) === 65_536 ? 65_536 : 0), 5_000, "A's bytes held"), 65_536, 'A holds 64 KiB');
  // B: any more is over the budget
  const b = await open(headFor(50_000));
  b.sock.write(bodyOf(50_000).subarray(0, 30_000));
  await until(() => b.answer().includes('\r\n\r\n'), 5_000, "B's answer");
  t.match(b.answer(), /^HTTP\/1\.1 503 /, 'B is refused');
  t.match(b.answer(), /retry-after: 1\r\n/i);
  t.match(b.answer(), /"code":"request_buffers_full"/);
  t.equal(a.answer(), '', 'A is still being received, unanswered');
  t.equal(await buffered(), 65_536, 'B holds nothing');
  b.sock.destroy();
  // A leaves with its body half-sent: its share goes back at once
  a.sock.destroy();
  await until(async () => (await buffered()) === 0, 5_000, "A's bytes to be released");
  t.pass('the bytes held are back to 0');
  // and a body gathered in parts fits again
  const body = bodyOf(50_000);
  const c = await open(headFor(body.length));
  c.sock.write(body.subarray(0, 40_000));
  await until(async () => (await buffered()) > 0, 5_000, "C's first part to be held");
  c.sock.write(body.subarray(40_000));
  await until(() => c.answer().includes('\r\n\r\n'), 5_000, "C's answer");
  t.match(c.answer(), /^HTTP\/1\.1 200 /, 'accepted');
  c.sock.destroy();
  t.equal(await until(async () => ((await buffered()) === 0 ? 'zero' : ''), 5_000, 'nothing held'), 'zero', 'handed on: nothing held');
  const metrics = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(metrics, /infergate_rejected_total\{reason="overloaded"[^}]*\} 1/, 'counted as a rejection');
});

t.test('a body stays in the budget while its request is in flight: the next one that would pass it is a 503, until the first ends', async (t) => {
  // the model server holds each request until the test lets it answer
  const held: ServerResponse[] = [];
  const answer = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  const answerNow = up.behaviour;
  up.behaviour = (_req, res) => void held.push(res);
  t.teardown(() => {
    up.behaviour = answerNow;
    for (const res of held) if (!res.writableEnded) answer(res);
  });
  const before = up.received.length;
  // A: 40,000 bytes, sent whole; the model server has it and has not answered
  const a = await open(headFor(40_000));
  a.sock.write(bodyOf(40_000));
  await until(() => up.received.length > before, 5_000, 'A to reach the model server');
  t.equal(await buffered(), 40_000, "A's body is still held: undici keeps it until the answer ends");
  // B: 30,000 more would pass 64 KiB
  const b = await open(headFor(30_000));
  b.sock.write(bodyOf(30_000));
  await until(() => b.answer().includes('\r\n\r\n'), 5_000, "B's answer");
  t.match(b.answer(), /^HTTP\/1\.1 503 /, 'B is refused while A is in flight');
  t.match(b.answer(), /retry-after: 1\r\n/i);
  t.match(b.answer(), /"code":"request_buffers_full"/);
  t.equal(up.received.length, before + 1, 'B never reached the model server');
  b.sock.destroy();
  // A's answer ends: its share goes back, and B's retry is served
  answer(held[0]);
  await until(() => a.answer().includes('\r\n\r\n'), 5_000, "A's answer");
  t.match(a.answer(), /^HTTP\/1\.1 200 /);
  a.sock.destroy();
  t.equal(await until(async () => ((await buffered()) === 0 ? 'zero' : ''), 5_000, "A's share to return"), 'zero', 'nothing held once A ended');
  up.behaviour = answerNow;
  const retry = await open(headFor(30_000));
  retry.sock.write(bodyOf(30_000));
  await until(() => retry.answer().includes('\r\n\r\n'), 5_000, "the retry's answer");
  t.match(retry.answer(), /^HTTP\/1\.1 200 /, 'the retry is served');
  retry.sock.destroy();
});
