// Header bytes a client or a model server sends: a request header that cannot be sent on is the client's
// fault (400 invalid_header) and never counts against a model server; a response header's bytes reach the
// client as the model server sent them. Raw sockets, so the test controls every byte.
import t from 'tap';
import { connect } from 'node:net';
import { request } from 'undici';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const behaviour = (_req: unknown, res: import('node:http').ServerResponse) => {
  // 'café' as UTF-8 bytes: Node writes a header string as Latin-1, one byte per character
  res.setHeader('x-note', Buffer.from('café', 'utf8').toString('latin1'));
  res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
};
const a = await startUpstream(behaviour);
const b = await startUpstream(behaviour);
const gw = await startGateway(gatewayConfig([a.endpoint, b.endpoint]));
t.teardown(async () => {
  await gw.stop();
  await a.close();
  await b.close();
});

/** One request written byte for byte on a fresh connection; the raw answer (head and body) as bytes. */
function raw(head: Buffer, body: string): Promise<Buffer> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect(Number(port), hostname, () => sock.write(Buffer.concat([head, Buffer.from(body)])));
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(text);
      if (end >= 0 && len && text.length >= end + 4 + Number(len[1])) {
        sock.destroy();
        resolve(Buffer.concat(chunks));
      }
    });
    sock.on('error', reject);
    sock.setTimeout(5_000, () => reject(new Error('no answer')));
  });
}

function headWith(extra: Buffer, body: string): Buffer {
  return Buffer.concat([
    Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n`),
    extra,
    Buffer.from('\r\n\r\n'),
  ]);
}

t.test('a request header with a byte undici cannot send is a 400, and ejects nobody', async (t) => {
  const body = chatBody();
  const before = a.received.length + b.received.length;
  for (let i = 0; i < 6; i++) {
    const answer = (await raw(headWith(Buffer.from([0x78, 0x2d, 0x61, 0x3a, 0x20, 0x61, 0x7f, 0x62]), body), body)).toString('latin1');
    t.match(answer, /^HTTP\/1\.1 400 /, `try ${i}: 400`);
    t.match(answer, /"code":"invalid_header"/);
    t.match(answer, /request header \\"x-a\\"/, 'the message names the header');
  }
  t.equal(a.received.length + b.received.length, before, 'no model server saw them');
  const pools = (await (await request(`${gw.adminUrl}/debug/pools`)).body.json()) as { p: { endpoints: Array<{ eligible: boolean; endpoint: string }> } };
  t.same(pools.p.endpoints.map((e) => e.eligible), [true, true], 'both endpoints are still eligible');
  const metrics = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.notMatch(metrics, /infergate_upstream_errors_total\{[^}]*\} [1-9]/, 'no upstream error was counted');
  const ok = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  t.equal(ok.statusCode, 200, 'the next request is served');
  await ok.body.text();
});

t.test("a response header's UTF-8 bytes reach the client as the model server sent them", async (t) => {
  const body = chatBody();
  const answer = await raw(headWith(Buffer.from('x-b: plain'), body), body);
  const text = answer.toString('latin1');
  t.match(text, /^HTTP\/1\.1 200 /);
  const line = text.split('\r\n').find((l) => l.toLowerCase().startsWith('x-note:'));
  t.ok(line, 'the header is passed on');
  t.same(Buffer.from(line!.slice('x-note: '.length), 'latin1'), Buffer.from('café', 'utf8'), 'byte for byte (not double-encoded)');
});
