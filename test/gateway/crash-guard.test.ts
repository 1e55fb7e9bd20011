// One request cannot take the gateway down or make it read a body differently from the model server: a
// body nested thousands of levels deep is refused before anything walks it, an alias rewrite touches the
// model bytes alone, a duplicated key the gateway acts on is refused. Real gateway processes, real sockets.
// (test/gateway/front-guard.test.ts: a failure inside one request's handling answers it 500.)
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startUpstream, streamSse, sseBody, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const up = await startUpstream((req, res, rec) => {
  if (rec.body.includes('"stream":true')) streamSse(res, sseBody(30), 20);
  else res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON);
});
t.teardown(() => up.close());

const deepContent = (depth: number) =>
  `{"model":"MODEL","messages":[{"role":"user","content":[${'['.repeat(depth)}${']'.repeat(depth)}]}]}`;

/** A streamed chat completion that has delivered its first bytes; `rest()` reads it to the end. */
async function openStream(url: string) {
  const res = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }), headers: { 'content-type': 'application/json' } });
  const it = res.body[Symbol.asyncIterator]();
  const first = await it.next();
  let text = Buffer.from(first.value as Buffer).toString();
  return {
    status: res.statusCode,
    async rest() {
      for (let c = await it.next(); !c.done; c = await it.next()) text += Buffer.from(c.value as Buffer).toString();
      return text;
    },
  };
}

async function post(url: string, body: string) {
  const res = await request(`${url}/v1/chat/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const text = await res.body.text();
  return { status: res.statusCode, json: JSON.parse(text) as { error?: { code: string; type: string; param: string | null } } };
}

t.test('a body nested 5,000 levels deep is a 400 json_too_deep, and a stream in flight is untouched', async (t) => {
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(() => gw.stop());
  const stream = await openStream(gw.url);
  const before = up.received.length;
  for (const model of ['test-model', 'alias']) {
    const r = await post(gw.url, deepContent(5000).replace('MODEL', model));
    t.equal(r.status, 400, `${model}: refused`);
    t.equal(r.json.error?.code, 'json_too_deep');
  }
  t.equal(up.received.length, before, 'nothing reached the model server');
  t.match(await stream.rest(), /data: \[DONE\]\n\n$/, 'the stream opened before ends whole');
  t.equal((await post(gw.url, chatBody())).status, 200, 'the next request is served');
  t.equal(gw.proc.child.exitCode, null, 'the gateway is still running');
  const ok = await post(gw.url, deepContent(50).replace('MODEL', 'test-model'));
  t.equal(ok.status, 200, 'nesting within the default limit (64) passes');
});

t.test('an alias rewrite forwards every other byte as the client sent it, at any depth the limit allows', async (t) => {
  const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_json_depth: 10_000 } } }));
  t.teardown(() => gw.stop());
  const stream = await openStream(gw.url);
  // 8,000 levels: the old rewrite (JSON.stringify of the whole body) overflowed the stack inside the uWS
  // data callback and took the process down
  const deep = deepContent(8000).replace('MODEL', 'alias');
  const odd = '{"seed":12345678901234567890,"model":"alias","x":1e400,"messages":[{"role":"user","content":"caf\u00e9"}]}';
  for (const body of [deep, odd]) {
    const before = up.received.length;
    const r = await post(gw.url, body);
    t.equal(r.status, 200, 'served');
    t.equal(up.received.length, before + 1, 'forwarded once');
    t.equal(up.received[before].body, body.replace('"model":"alias"', '"model":"test-model"'), 'byte for byte but the model');
  }
  t.match(await stream.rest(), /data: \[DONE\]\n\n$/, 'the stream in flight ends whole');
  t.equal(gw.proc.child.exitCode, null, 'the gateway is still running');
});

t.test('a key the gateway acts on, given twice, is a 400 naming it', async (t) => {
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(() => gw.stop());
  const before = up.received.length;
  const r = await post(gw.url, '{"model":"test-model","messages":[{"role":"user","content":"x"}],"model":"alias"}');
  t.equal(r.status, 400);
  t.match(r.json.error, { code: 'invalid_field', param: 'model' });
  t.equal(up.received.length, before, 'nothing reached the model server');
});
