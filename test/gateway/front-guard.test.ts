// A failure inside one request's handling answers that request and never reaches the process: the front's
// uWS callbacks and the undici handler each hand an exception to the request's onInternalError. Real
// sockets: a uWS listener in this process (the front adapter itself) and a real upstream.
import t from 'tap';
import { request, Pool } from 'undici';
import { Front } from '../../src/gateway/uws-front.js';
import type { Answer, ClientHandler, ClientSide } from '../../src/gateway/client.js';
import { dispatchTry, type UpstreamListener } from '../../src/gateway/upstream.js';
import type { Upstreams } from '../../src/gateway/upstreams.js';
import { startUpstream, CHAT_JSON } from '../helpers/upstream.js';

const bugs: unknown[] = [];
const front = new Front({
  maxHeaderBytes: 16_384,
  onHandlerError: (err): Answer => {
    bugs.push(err);
    return { status: '500 Internal Server Error', contentType: 'application/json', body: '{"error":"start"}' };
  },
});

/** A handler whose onBody throws for a body saying "throw"; onInternalError answers 500 itself. */
function handler(client: ClientSide): ClientHandler {
  return {
    wantsBody: true,
    onBody(body) {
      if (body.toString() === 'throw') throw new Error('a bug in onBody');
      client.cork(() => client.writeStatus('200 OK').end('fine'));
    },
    onBodyTooLarge() {
      client.cork(() => client.writeStatus('413 Payload Too Large').end());
    },
    onClientAbort() {},
    onInternalError(err) {
      bugs.push(err);
      client.cork(() => client.writeStatus('500 Internal Server Error').end('{"error":"internal"}'));
    },
  };
}
front.post('/p', 1024, (client) => handler(client));
front.post('/start', 1024, () => {
  throw new Error('a bug while starting');
});
front.get('/g', (head) => {
  if (!head) throw new Error('a bug in a GET route');
  return { status: '200 OK' };
});
const port = await front.listen('127.0.0.1', 0);
t.teardown(() => front.close());
const base = `http://127.0.0.1:${port}`;

t.test('a handler that throws in a uWS callback answers 500; the listener goes on', async (t) => {
  const bad = await request(`${base}/p`, { method: 'POST', body: 'throw' });
  t.equal(bad.statusCode, 500);
  t.equal(await bad.body.text(), '{"error":"internal"}');
  t.match(bugs.pop(), { message: 'a bug in onBody' }, 'the request got the exception');
  const start = await request(`${base}/start`, { method: 'POST', body: 'x' });
  t.equal(start.statusCode, 500, 'a handler that fails to start');
  t.equal(await start.body.text(), '{"error":"start"}');
  const get = await request(`${base}/g`);
  t.equal(get.statusCode, 500, 'a GET route that throws');
  await get.body.text();
  t.equal(bugs.length, 2);
  const good = await request(`${base}/p`, { method: 'POST', body: 'ok' });
  t.equal(good.statusCode, 200, 'the next request is served');
  t.equal(await good.body.text(), 'fine');
});

t.test("an exception in the exchange's handling of an undici callback goes to onInternalError, not into undici", async (t) => {
  const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
  const pool = new Pool(`http://${up.endpoint}`);
  t.teardown(async () => {
    await pool.close();
    await up.close();
  });
  const upstreams = { get: () => pool } as unknown as Upstreams;
  for (const failing of ['upstreamStarted', 'onUpstreamResponse', 'onUpstreamData', 'onUpstreamEnd'] as const) {
    const caught = await new Promise<unknown>((resolve) => {
      const listener: UpstreamListener = {
        isCurrent: () => true,
        upstreamStarted: () => {
          if (failing === 'upstreamStarted') throw new Error(failing);
        },
        onUpstreamResponse: () => {
          if (failing === 'onUpstreamResponse') throw new Error(failing);
        },
        onUpstreamData: () => {
          if (failing === 'onUpstreamData') throw new Error(failing);
        },
        onUpstreamEnd: () => {
          if (failing === 'onUpstreamEnd') throw new Error(failing);
          resolve(null);
        },
        onUpstreamError: (err) => resolve(err),
        onInternalError: (err) => resolve(err),
      };
      dispatchTry(upstreams, up.endpoint, 'chat', { 'content-type': 'application/json' }, Buffer.from('{}'), listener, 1);
    });
    t.match(caught, { message: failing }, `${failing}: the exception reached onInternalError`);
  }
});
