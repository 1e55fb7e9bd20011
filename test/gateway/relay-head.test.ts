// The relay's pure decisions about a model server's answer: which headers pass, and gather or stream.
import t from 'tap';
import { BUFFER_LIMIT, gathers, relayedHeaders } from '../../src/gateway/relay.js';

t.test('hop-by-hop, framing and our own headers are not passed back; repeated ones stay separate', async (t) => {
  const list = relayedHeaders({
    connection: 'keep-alive', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', 'content-length': '10', date: 'now',
    'x-request-id': 'theirs', uwebsockets: '20', trailer: 'x', upgrade: 'h2c', te: 'x', 'proxy-connection': 'x', 'proxy-authenticate': 'x',
    'content-type': 'text/event-stream', 'set-cookie': ['a=1', 'b=2'], 'x-upstream': 'yes', 'x-absent': undefined,
  });
  t.same(list, [['content-type', 'text/event-stream'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2'], ['x-upstream', 'yes']]);
});

t.test('gather or stream', async (t) => {
  t.equal(gathers(true, 10, false), false, 'SSE always streams');
  t.equal(gathers(false, 10, true), true, 'a declared length within the limit is gathered, even when streaming was asked');
  t.equal(gathers(false, BUFFER_LIMIT, true), true, 'the limit is inclusive');
  t.equal(gathers(false, BUFFER_LIMIT + 1, false), false, 'a longer declared length streams');
  t.equal(gathers(false, -1, false), true, 'no length, no stream asked: gathered');
  t.equal(gathers(false, -1, true), false, 'no length, stream asked: streamed');
});
