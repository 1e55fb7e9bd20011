// Smuggling shapes on the routes that answer without reading a body: GET/HEAD (client and admin ports) and
// the fallback. Each head is followed by a valid POST on the same connection; a gateway that answers the
// first request reads that POST as the next one and forwards it (found by `bench reliability`: see
// RELIABILITY.md). The connection must be cut instead, as on the POST routes, and nothing reach upstream.
import t from 'tap';
import { rawExchange } from '../../native-bench/rawhttp.js';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startUpstream, CHAT_JSON } from '../helpers/upstream.js';
import { uwsBuild } from '../helpers/tools.js';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const gw = await startGateway(gatewayConfig([up.endpoint]));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

// uWS 20.57 refuses a head with both a length and chunked itself: its own 400 page, then it closes (20.30
// drops it without a byte). Either way the smuggled request is not served.
const lengthAndChunked = (await uwsBuild()) === '20.30' ? [] : [400];

const body = JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'smuggled' }] });
const post = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

for (const [base, line] of [
  [gw.url, 'GET /v1/models'],
  [gw.url, 'HEAD /v1/models'],
  [gw.url, 'PUT /nowhere'],
  [gw.adminUrl, 'GET /healthz'],
] as const) {
  const { hostname: host, port } = new URL(base);
  const cases: Array<[string, string]> = [
    ['two different lengths', `Content-Length: 0\r\nContent-Length: ${post.length}\r\n\r\n${post}`],
    ['chunked;q=1', `Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n${post}`],
    ['a length and chunked', `Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${post}`],
  ];
  const answers: Record<string, number[]> = { 'a length and chunked': lengthAndChunked };
  t.test(`${line} (${base === gw.url ? 'client' : 'admin'} port)`, async (t) => {
    for (const [name, rest] of cases) {
      const before = up.received.length;
      const r = await rawExchange({ host, port: Number(port), parts: [`${line} HTTP/1.1\r\nHost: x\r\n${rest}`], deadlineMs: 5_000, waitForClose: true, head: line.startsWith('HEAD') });
      t.ok(r.closed && !r.timedOut, `${name}: the connection is closed at once`);
      t.same(r.responses.map((x) => x.status), answers[name] ?? [], `${name}: no answer, to the first request or the smuggled one`);
      t.equal(up.received.length, before, `${name}: nothing reached the model server`);
    }
  });
}

t.test('a plain GET with a body length (the same on every line) is still answered', async (t) => {
  const { hostname: host, port } = new URL(gw.url);
  const r = await rawExchange({ host, port: Number(port), parts: ['GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n'], deadlineMs: 5_000 });
  t.equal(r.responses[0]?.status, 200);
});
