// Interim (1xx) answers on both sides, and the header limit on GET routes.
// - Client side: uWS 20.30 writes `100 Continue` itself, before any handler runs, for every request with
//   `Expect: 100-continue`; a refusal the head already decides (413, 415) follows it at once, so the
//   client never has to send the body (pinned here; the gateway README says so).
// - Upstream side: interim answers (102, 103) are passed over and the final answer relayed; an unasked
//   `100 Continue` is a broken connection to undici 7, so it is answered like one (another endpoint, then 502).
// - GET, HEAD and unrouted requests: a head over max_header_bytes is answered 431 like a POST's.
// Real gateway process, raw sockets for exact bytes, node:http upstreams.
import t from 'tap';
import { connect } from 'node:net';
import { request } from 'undici';
import { gatewayConfig, startGateway } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_body_bytes: '1kb', max_header_bytes: '2kb' } } }));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

/** Writes `head` on a fresh connection and gives what arrives until the final answer's body is complete. */
function exchange(head: string): Promise<string> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    let got = '';
    const sock = connect(Number(port), hostname, () => sock.write(head));
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const final = got.replace(/^HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n/, '');
      const end = final.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length: (\d+)\r\n/i.exec(final);
      if (end >= 0 && len && final.length >= end + 4 + Number(len[1])) {
        sock.destroy();
        resolve(got);
      }
    });
    sock.on('error', reject);
    // closed before a whole answer (uWS's own pages carry no Content-Length): an error, not a wait forever
    sock.on('close', () => reject(new Error(`closed without a whole answer; got ${JSON.stringify(got)}`)));
    sock.setTimeout(5_000, () => {
      sock.destroy();
      reject(new Error(`no whole answer; got ${JSON.stringify(got)}`));
    });
  });
}

t.test('Expect: 100-continue with a body over the limit: the 413 follows the 100 at once, no body sent', async (t) => {
  const got = await exchange('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n');
  t.match(got, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 413 Payload Too Large\r\n/, 'uWS 20.30 writes the 100 first; the refusal comes right after');
  t.match(got, /"code":"request_too_large"/);
});

t.test('Expect: 100-continue with a compressed body: 415 right after the 100', async (t) => {
  const got = await exchange('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\nContent-Encoding: gzip\r\nExpect: 100-continue\r\n\r\n');
  t.match(got, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 415 Unsupported Media Type\r\n/);
});

t.test('interim answers from the model server (102, 103) are passed over; the final one is relayed', async (t) => {
  up.behaviour = (_req, res) => {
    res.writeProcessing();
    res.writeEarlyHints({ link: '</style.css>; rel=preload' }, () => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
  };
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(res.statusCode, 200);
  t.equal(await res.body.text(), CHAT_JSON);
  up.behaviour = (_req, r) => {
    r.writeEarlyHints({ link: '</a>; rel=preload' });
    const body = 'data: {"x":1}\n\ndata: [DONE]\n\n';
    r.writeHead(200, { 'content-type': 'text/event-stream' }).end(body);
  };
  const sse = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }), headers: { 'content-type': 'application/json' } });
  t.equal(sse.statusCode, 200, 'a streamed answer after an interim one');
  t.equal(await sse.body.text(), 'data: {"x":1}\n\ndata: [DONE]\n\n');
});

t.test('a model server that fails after an interim answer is retried on another: nothing reached the client', async (t) => {
  const dying = await startUpstream((_req, res) => {
    res.writeEarlyHints({ link: '</a>; rel=preload' }, () => res.socket?.destroy());
  });
  const good = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
  const two = await startGateway(gatewayConfig([dying.endpoint, good.endpoint]));
  t.teardown(async () => {
    await two.stop();
    await dying.close();
    await good.close();
  });
  for (let i = 0; i < 2; i++) {
    // round robin: one of the two requests goes to the dying server first
    const res = await request(`${two.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
    t.equal(res.statusCode, 200, `request ${i + 1} answered by the good server`);
    t.equal(await res.body.text(), CHAT_JSON);
  }
  t.ok(dying.received.length >= 1, 'the dying server got at least one of them first');
});

t.test('an unasked 100 Continue from the model server: undici 7 drops that connection, so the client gets 502', async (t) => {
  up.behaviour = (_req, res) => {
    res.writeContinue();
    res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
  };
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody(), headers: { 'content-type': 'application/json' } });
  t.equal(res.statusCode, 502);
  const body = (await res.body.json()) as { error: { code: string } };
  t.equal(body.error.code, 'upstream_unavailable');
  up.behaviour = (_req, r) => r.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
});

t.test('GET, HEAD and unrouted requests with a head over max_header_bytes are answered 431', async (t) => {
  const big = `X-Big: ${'a'.repeat(3000)}\r\n`;
  const models = await exchange(`GET /v1/models HTTP/1.1\r\nHost: x\r\n${big}\r\n`);
  t.match(models, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/, 'GET /v1/models');
  t.match(models, /"code":"headers_too_large"/);
  const unrouted = await exchange(`GET /nowhere HTTP/1.1\r\nHost: x\r\n${big}\r\n`);
  t.match(unrouted, /^HTTP\/1\.1 431 /, 'an unrouted GET');
  const longUrl = await exchange(`GET /v1/models?${'q'.repeat(3000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  t.match(longUrl, /^HTTP\/1\.1 431 /, 'a long query string counts too');
  const admin = await request(`${gw.adminUrl}/healthz`, { headers: { 'x-big': 'a'.repeat(3000) } });
  t.equal(admin.statusCode, 431, 'the admin port too');
  await admin.body.text();
  const head = await request(`${gw.url}/v1/models`, { method: 'HEAD', headers: { 'x-big': 'a'.repeat(3000) } });
  t.equal(head.statusCode, 431, 'HEAD');
  await head.body.text();
  const small = await request(`${gw.url}/v1/models`, { headers: { 'x-small': 'a'.repeat(500) } });
  t.equal(small.statusCode, 200, 'a head within the limit is served');
  await small.body.text();
});
