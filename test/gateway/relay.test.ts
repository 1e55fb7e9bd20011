// The relay: its pure decisions (headers passed back, gather or stream), then against a recording client:
// one write per event-loop turn, backpressure, the error event of a broken stream, Connection: close only
// on a whole answer. No sockets.
import t from 'tap';
import { BUFFER_LIMIT, gathers, relayedHeaders, Relay, type RelayOwner } from '../../src/gateway/relay.js';
import type { ClientSide } from '../../src/gateway/client.js';
import { errors } from '../../src/openai/errors.js';

t.test('hop-by-hop, framing and our own headers are not passed back; repeated ones stay separate', async (t) => {
  const list = relayedHeaders({
    connection: 'keep-alive', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', 'content-length': '10', date: 'now',
    'x-request-id': 'theirs', uwebsockets: '20', trailer: 'x', upgrade: 'h2c', te: 'x', 'proxy-connection': 'x', 'proxy-authenticate': 'x',
    'content-type': 'text/event-stream', 'set-cookie': ['a=1', 'b=2'], 'x-upstream': 'yes', 'x-absent': undefined,
  });
  t.same(list, [['content-type', 'text/event-stream'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2'], ['x-upstream', 'yes']]);
});

t.test("headers the model server names in its Connection header are hop-by-hop: not passed back (RFC 9110 §7.6.1)", async (t) => {
  t.same(relayedHeaders({ connection: 'keep-alive, X-Secret ,x-two', 'x-secret': '1', 'x-two': '2', 'x-kept': '3' }), [['x-kept', '3']]);
  t.same(relayedHeaders({ connection: ['close', 'X-Secret'], 'x-secret': '1', 'x-kept': '3' }), [['x-kept', '3']], 'over several Connection lines');
  t.same(relayedHeaders({ connection: ' , ', 'x-kept': '3' }), [['x-kept', '3']], 'empty names name nothing');
});

t.test("a model server's CORS headers are not passed back (CORS is the gateway's: the cors section)", async (t) => {
  const list = relayedHeaders({
    'content-type': 'application/json', 'access-control-allow-origin': '*', 'access-control-allow-credentials': 'true',
    'access-control-expose-headers': 'x-a', vary: 'Origin',
  });
  t.same(list, [['content-type', 'application/json'], ['vary', 'Origin']]);
});

t.test('gather or stream', async (t) => {
  t.equal(gathers(true, 10, false), false, 'SSE always streams');
  t.equal(gathers(false, 10, true), true, 'a declared length within the limit is gathered, even when streaming was asked');
  t.equal(gathers(false, BUFFER_LIMIT, true), true, 'the limit is inclusive');
  t.equal(gathers(false, BUFFER_LIMIT + 1, false), false, 'a longer declared length streams');
  t.equal(gathers(false, -1, false), true, 'no length, no stream asked: gathered');
  t.equal(gathers(false, -1, true), false, 'no length, stream asked: streamed');
});

type Call = [string, ...unknown[]];

class RecordingClient implements ClientSide {
  calls: Call[] = [];
  corked = 0;
  writable = true;
  writableHandlers: Array<() => boolean> = [];
  writeStatus(status: string) { this.calls.push(['status', status]); }
  writeHeader(name: string, value: string) { this.calls.push(['header', name, value]); }
  write(chunk: Buffer | string) {
    this.calls.push(['write', chunk.toString()]);
    return this.writable;
  }
  end(body?: Buffer | string, closeConnection?: boolean) { this.calls.push(['end', body?.toString(), closeConnection]); }
  close() { this.calls.push(['close']); }
  cork(fn: () => void) {
    this.corked++;
    fn();
  }
  onWritable(handler: () => boolean) { this.writableHandlers.push(handler); }
}

function owner(opts: { draining?: boolean } = {}) {
  const client = new RecordingClient();
  const o = {
    client,
    live: true,
    paused: 0,
    resumed: 0,
    relaying: () => o.live,
    writeOwnHeaders: () => void client.writeHeader('x-request-id', 'r1'),
    pauseUpstream: () => void o.paused++,
    resumeUpstream: () => void o.resumed++,
    closesConnection: () => opts.draining === true,
  };
  return o satisfies RelayOwner;
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const JSON_HEAD = { 'content-type': 'application/json', 'content-length': '7', connection: 'keep-alive' };
const SSE_HEAD = { 'content-type': 'text/event-stream', 'transfer-encoding': 'chunked' };

t.test('a small JSON answer is gathered and sent whole, with its head, in one cork', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, JSON_HEAD, false);
  relay.data(Buffer.from('{"a":'));
  relay.data(Buffer.from('1}'));
  await turn();
  t.same(o.client.calls, [], 'nothing sent before the end');
  relay.end();
  t.equal(o.client.corked, 1);
  t.same(o.client.calls, [
    ['status', '200 OK'], ['header', 'content-type', 'application/json'], ['header', 'x-request-id', 'r1'], ['end', '{"a":1}', undefined],
  ]);
});

t.test('while draining, a whole answer closes its connection', async (t) => {
  const o = owner({ draining: true });
  const relay = new Relay(o, 200, JSON_HEAD, false);
  relay.data(Buffer.from('{}'));
  relay.end();
  t.same(o.client.calls.at(-1), ['end', '{}', true]);
});

t.test('SSE: the chunks of one turn go in one write, the head once; the end closes nothing', async (t) => {
  const o = owner({ draining: true });
  const relay = new Relay(o, 200, SSE_HEAD, true);
  t.ok(relay.sse);
  relay.data(Buffer.from('data: 1\n\n'));
  relay.data(Buffer.from('data: 2\n\n'));
  await turn();
  relay.data(Buffer.from('data: 3\n\n'));
  await turn();
  relay.end();
  t.same(o.client.calls, [
    ['status', '200 OK'], ['header', 'content-type', 'text/event-stream'], ['header', 'x-request-id', 'r1'],
    ['write', 'data: 1\n\ndata: 2\n\n'], ['write', 'data: 3\n\n'], ['end', undefined, undefined],
  ]);
  t.ok(relay.headersSent);
});

t.test('an answer longer than the gather limit is passed on as it comes', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, { 'content-type': 'application/json' }, false);
  relay.data(Buffer.alloc(BUFFER_LIMIT, 'a'));
  await turn();
  t.same(o.client.calls, [], 'up to the limit: gathered');
  relay.data(Buffer.from('b'));
  await turn();
  t.equal(o.client.calls.filter((c) => c[0] === 'write').length, 1, 'past it: what gathered is written');
  t.equal((o.client.calls.find((c) => c[0] === 'write')![1] as string).length, BUFFER_LIMIT + 1);
});

t.test('backpressure: a refused write pauses the upstream, the drain resumes it; one onWritable', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, SSE_HEAD, true);
  o.client.writable = false;
  relay.data(Buffer.from('data: 1\n\n'));
  await turn();
  t.equal(o.paused, 1);
  relay.data(Buffer.from('data: 2\n\n'));
  await turn();
  t.equal(o.paused, 2);
  t.equal(o.client.writableHandlers.length, 1, 'hooked once');
  t.equal(o.client.writableHandlers[0](), true);
  t.equal(o.resumed, 1);
  t.equal(o.client.writableHandlers[0](), true);
  t.equal(o.resumed, 1, 'resumed only when paused');
});

t.test('nothing is written once the exchange stopped relaying', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, SSE_HEAD, true);
  relay.data(Buffer.from('data: 1\n\n'));
  o.live = false;
  await turn();
  t.same(o.client.calls, []);
});

t.test('a broken stream ends with what was pending and an error event', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, SSE_HEAD, true);
  relay.data(Buffer.from('data: 1\n\n'));
  await turn();
  relay.data(Buffer.from('data: 2\n\n'));
  relay.endWithErrorEvent(errors.upstreamStreamBroken());
  const calls = o.client.calls.slice(-3);
  t.same(calls[0], ['write', 'data: 2\n\n']);
  t.match(calls[1], ['write', /^data: \{"error":\{.*"code":"upstream_stream_broken"/]);
  t.same(calls[2], ['end', undefined, undefined]);
});

t.test('a write refused after the client took some restarts its not-reading clock, even with the long stall timer armed', async (t) => {
  const o = { ...owner(), stalled: [] as string[] };
  const stalling = { ...o, relaying: () => true, clientStalled: (why: string) => void o.stalled.push(why) };
  // client_stall_timeout 10 minutes; a client that takes no byte for 100 ms is ended (5 s in service)
  const relay = new Relay(stalling, 200, SSE_HEAD, true, 600_000, false, 100);
  t.teardown(() => relay.dispose());
  o.client.writable = false;
  relay.data(Buffer.from('data: 1\n\n'));
  await turn(); // refused: the not-reading deadline is 100 ms away
  o.client.writableHandlers[0](); // the client took some (as the kernel's buffers grow): no deadline but the long one
  await new Promise((resolve) => setTimeout(resolve, 150)); // the 100 ms timer has run, found nothing due, and waits for the long one
  t.same(o.stalled, [], 'not ended: the client had taken some');
  relay.data(Buffer.from('data: 2\n\n'));
  await turn(); // refused again, and the client takes nothing more
  const deadline = Date.now() + 2000;
  while (o.stalled.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  t.equal(o.stalled.length, 1, 'ended within 100 ms of the second refusal, not after 10 minutes');
  t.match(o.stalled[0], /took no byte/);
});

t.test('a write taken whole after a refused one resumes the upstream: no writable event need follow', async (t) => {
  const o = owner();
  const relay = new Relay(o, 200, SSE_HEAD, true);
  o.client.writable = false;
  relay.data(Buffer.from('data: 1\n\n'));
  await turn(); // refused: the upstream is paused
  t.equal(o.paused, 1);
  // a chunk already on its way when the pause took effect; the client took what was refused and this one,
  // and the kernel, near full, may never say it is writable again
  o.client.writable = true;
  relay.data(Buffer.from('data: 2\n\n'));
  await turn();
  t.equal(o.resumed, 1, 'the upstream is read again at once');
  t.equal(o.client.writableHandlers[0](), true);
  t.equal(o.resumed, 1, 'a writable event after it does not resume twice');
});
