// Request shapes uWS 20.30 never dispatches to the gateway (pinned, as the gateway README lists them): the
// connection gets no byte and uWS closes it after its idle timeout (8 to 12 s). All are sent at once, so
// the file takes about that long. A head just under the header-line bound is answered, as a control.
import t from 'tap';
import { connect } from 'node:net';
import { gatewayConfig, startGateway } from '../helpers/process.js';

const gw = await startGateway(gatewayConfig(['127.0.0.1:1']));
t.teardown(() => gw.stop());
const { hostname, port } = new URL(gw.url);

const lines = (n: number) => Array.from({ length: n - 1 }, (_, i) => `x-h${i}: v\r\n`).join('');
const UNANSWERED: Record<string, string> = {
  '49 header lines': `GET /v1/models HTTP/1.1\r\nHost: a\r\n${lines(49)}\r\n`,
  'an absolute-form URI': 'GET http://a/v1/models HTTP/1.1\r\nHost: a\r\n\r\n',
  'an obs-fold header continuation': 'GET /v1/models HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n',
  'a NUL in a header value': 'GET /v1/models HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n',
  'bare LF line ends': 'GET /v1/models HTTP/1.1\nHost: a\n\n',
  'CONNECT': 'CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n',
  'OPTIONS *': 'OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n',
  'HTTP/1.0': 'GET /v1/models HTTP/1.0\r\nHost: a\r\n\r\n',
  'HTTP/1.1 without Host': 'GET /v1/models HTTP/1.1\r\n\r\n',
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

t.test('each shape gets no answer and its connection is closed by uWS', async (t) => {
  const results = await Promise.all(Object.entries(UNANSWERED).map(async ([name, bytes]) => [name, await send(bytes)] as const));
  for (const [name, { got, closed }] of results) {
    t.equal(got, '', `${name}: no byte`);
    t.ok(closed, `${name}: closed by the server`);
  }
});

t.test('48 header lines are answered', async (t) => {
  const { hostname: h, port: p } = new URL(gw.url);
  const got = await new Promise<string>((resolve, reject) => {
    const sock = connect(Number(p), h, () => sock.write(`GET /v1/models HTTP/1.1\r\nHost: a\r\n${lines(48)}\r\n`));
    sock.once('data', (d: Buffer) => {
      sock.destroy();
      resolve(d.toString('latin1'));
    });
    sock.on('error', reject);
  });
  t.match(got, /^HTTP\/1\.1 200 OK\r\n/);
});
