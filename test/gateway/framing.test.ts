// Request framing that two HTTP parsers could read differently (the basis of request smuggling) cuts the
// connection, so that no byte after the head is served as another request (uWS 20.30 would serve a request
// pipelined behind a 400 before closing: see the gateway README); a compression hidden behind a second
// Content-Encoding line is a 415. Raw sockets, every byte ours.
import t from 'tap';
import { connect } from 'node:net';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON } from '../helpers/upstream.js';
import { uwsBuild } from '../helpers/tools.js';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const gw = await startGateway(gatewayConfig([up.endpoint]));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});
const { hostname, port } = new URL(gw.url);

/** Writes `bytes` on a fresh connection; everything the gateway sends until it closes (or 3 s pass). */
function exchange(bytes: string): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const sock = connect(Number(port), hostname, () => sock.write(bytes));
    sock.on('data', (d: Buffer) => (text += d.toString('latin1')));
    sock.on('close', () => resolve({ text, closed: true }));
    sock.on('error', reject);
    sock.setTimeout(3_000, () => {
      sock.destroy();
      resolve({ text, closed: false });
    });
  });
}

const smuggled = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n';

t.test('ambiguous framing: the connection is cut, nothing is served from it, nothing reaches upstream', async (t) => {
  const cases: Array<[string, string]> = [
    ['two different lengths', `${head}Content-Length: 2\r\nContent-Length: ${2 + smuggled.length}\r\n\r\n{}${smuggled}`],
    ['a transfer coding with a parameter', `${head}Transfer-Encoding: chunked;q=1\r\n\r\n2\r\n{}\r\n0\r\n\r\n${smuggled}`],
    ['identity then chunked', `${head}Transfer-Encoding: identity, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n${smuggled}`],
    ['a length next to chunked', `${head}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n${smuggled}`],
  ];
  // uWS 20.57 answers a length next to chunked itself (its own 400 page) and closes; 20.30 drops it silently
  const ownAnswer = (await uwsBuild()) === '20.30' ? '' : 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n<h1>Bad Request</h1><hr><i>uWebSockets/20 Server</i>';
  for (const [name, bytes] of cases) {
    const before = up.received.length;
    const r = await exchange(bytes);
    t.ok(r.closed, `${name}: the connection is closed`);
    const expected = name === 'a length next to chunked' ? ownAnswer : '';
    t.equal(r.text, expected, `${name}: nothing ${expected ? "but uWS's own 400 " : ''}is answered on it (the smuggled GET is not served)`);
    t.equal(up.received.length, before, `${name}: nothing reached the model server`);
  }
  const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text();
  // the first three reach the gateway, which cuts them; uWS itself refuses a head with both a length and
  // chunked before any handler runs (20.30 drops it, 20.57 answers its own 400)
  t.match(metrics, /infergate_rejected_total\{reason="invalid"[^}]*\} 3/, 'each cut is counted');
  // the log reaches the pipe after the counter moved (seen once in the image run): wait for it, with a deadline
  const cuts = () => (gw.proc.stdout().match(/"msg":"connection cut"/g) ?? []).length;
  await until(() => cuts() >= 3, 5_000, 'three "connection cut" log lines').catch(() => undefined);
  t.equal(cuts(), 3, 'and logged');
  // the gateway cut them: recorded as its 400, not as a client that left (499)
  t.match(metrics, /infergate_requests_total\{model="",pool="",code="400"\} 3/, 'recorded as 400');
  t.notMatch(metrics, /code="499"/, 'not as 499');
});

t.test('the same length twice and plain chunked are fine', async (t) => {
  const body = '{"model":"test-model","messages":[{"role":"user","content":"x"}]}';
  const same = await exchange(`${head}Content-Length: ${body.length}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  t.match(same.text, /^HTTP\/1\.1 200 /);
  const chunked = await exchange(`${head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
  t.match(chunked.text, /^HTTP\/1\.1 200 /);
});

t.test('gzip behind a second Content-Encoding line is still a compressed body: 415', async (t) => {
  const r = await exchange(`${head}Content-Length: 2\r\nContent-Encoding: gzip\r\nContent-Encoding: identity\r\nConnection: close\r\n\r\n{}`);
  t.match(r.text, /^HTTP\/1\.1 415 /);
  t.match(r.text, /"code":"unsupported_content_encoding"/);
});
