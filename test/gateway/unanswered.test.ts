// Request shapes uWS never dispatches to the gateway (pinned, as the gateway README lists them). On 20.30
// the connection gets no byte and uWS closes it after its idle timeout (8 to 12 s); all are sent at once,
// so the file takes about that long. On 20.57 uWS answers each at once with its own small page (400, 431
// or 505) and closes. Either way nothing reaches the gateway's code. A head just under the header-line
// bound is answered, as a control.
import t from 'tap';
import { connect } from 'node:net';
import { gatewayConfig, startGateway } from '../helpers/process.js';
import { uwsBuild } from '../helpers/tools.js';

const gw = await startGateway(gatewayConfig(['127.0.0.1:1']));
t.teardown(() => gw.stop());
const { hostname, port } = new URL(gw.url);
const build = await uwsBuild();
// 20.30 keeps 50 header slots (the request line included), 20.57 keeps 100
const maxLines = build === '20.30' ? 48 : 98;

const lines = (n: number) => Array.from({ length: n - 1 }, (_, i) => `x-h${i}: v\r\n`).join('');
/** Each shape, with the status 20.57 answers it with (20.30 sends nothing). */
const UNANSWERED: Record<string, [string, number]> = {
  [`${maxLines + 1} header lines`]: [`GET /v1/models HTTP/1.1\r\nHost: a\r\n${lines(maxLines + 1)}\r\n`, 431],
  'an absolute-form URI': ['GET http://a/v1/models HTTP/1.1\r\nHost: a\r\n\r\n', 505],
  'an obs-fold header continuation': ['GET /v1/models HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n', 400],
  'a NUL in a header value': ['GET /v1/models HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n', 400],
  'bare LF line ends': ['GET /v1/models HTTP/1.1\nHost: a\n\n', 505],
  'CONNECT': ['CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n', 505],
  'OPTIONS *': ['OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n', 505],
  'HTTP/1.0': ['GET /v1/models HTTP/1.0\r\nHost: a\r\n\r\n', 505],
  'HTTP/1.1 without Host': ['GET /v1/models HTTP/1.1\r\n\r\n', 400],
};

/** What the connection receives before it closes (the deadline ends it as a failure). */
function send(bytes: string): Promise<{ got: string; closed: boolean }> {
  return new Promise((resolve) => {
    let got = '';
    const sock = connect(Number(port), hostname, () => sock.write(bytes));
    const deadline = setTimeout(() => {
      sock.destroy();
      resolve({ got, closed: false });
    }, 20_000);
    sock.on('data', (d: Buffer) => (got += d.toString('latin1')));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(deadline);
      resolve({ got, closed: true });
    });
  });
}

t.test(`each shape is refused by uWS itself (uws ${build}) and its connection closed`, async (t) => {
  const results = await Promise.all(Object.entries(UNANSWERED).map(async ([name, [bytes, status]]) => [name, status, await send(bytes)] as const));
  for (const [name, status, { got, closed }] of results) {
    if (build === '20.30') t.equal(got, '', `${name}: no byte`);
    else {
      t.match(got, new RegExp(`^HTTP/1\\.1 ${status} [^\\r]*\\r\\nConnection: close\\r\\n\\r\\n<h1>`), `${name}: uWS's own ${status} page`);
      t.notMatch(got, /"error"/, `${name}: not the gateway's answer`);
    }
    t.ok(closed, `${name}: closed by the server`);
  }
});

t.test(`${maxLines} header lines are answered`, async (t) => {
  const { hostname: h, port: p } = new URL(gw.url);
  const got = await new Promise<string>((resolve, reject) => {
    const sock = connect(Number(p), h, () => sock.write(`GET /v1/models HTTP/1.1\r\nHost: a\r\n${lines(maxLines)}\r\n`));
    sock.once('data', (d: Buffer) => {
      sock.destroy();
      resolve(d.toString('latin1'));
    });
    sock.on('error', reject);
  });
  t.match(got, /^HTTP\/1\.1 200 OK\r\n/);
});
