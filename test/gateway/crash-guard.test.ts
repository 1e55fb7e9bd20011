// One request cannot take the gateway down: a body nested thousands of levels deep is refused before
// anything walks it, and a failure inside a request's own handling answers that request 500 while the
// process, and the streams in flight through it, go on. Real gateway processes, real sockets.
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
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
  return { status: res.statusCode, json: JSON.parse(text) as { error?: { code: string; type: string } } };
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

t.test('a failure inside one request\'s handling answers it 500 and is logged; the process goes on', async (t) => {
  // With the depth limit raised out of the way, the alias rewrite's JSON.stringify overflows the stack on
  // this body: a genuine exception inside the uWS data callback, which used to end the process.
  const gw = await startGateway(gatewayConfig([up.endpoint], { over: { limits: { max_json_depth: 10_000 }, logging: { level: 'error', access_log: false } } }));
  t.teardown(() => gw.stop());
  const stream = await openStream(gw.url);
  const before = up.received.length;
  const r = await post(gw.url, deepContent(8000).replace('MODEL', 'alias'));
  t.equal(r.status, 500, 'the failed request is answered');
  t.equal(r.json.error?.code, 'internal_error');
  t.equal(r.json.error?.type, 'server_error');
  t.equal(up.received.length, before, 'it never reached the model server');
  const line = await until(() => gw.proc.stdout().split('\n').find((l) => l.includes('request handling failed')), 5_000, 'the error log line');
  t.match(JSON.parse(line), { level: 50, req_id: /./, err: { message: /call stack/ } }, 'logged as an error with the request id and the cause');
  t.match(await stream.rest(), /data: \[DONE\]\n\n$/, 'the stream in flight ends whole');
  t.equal((await post(gw.url, chatBody())).status, 200, 'the next request is served');
  const deepPlain = await post(gw.url, deepContent(8000).replace('MODEL', 'test-model'));
  t.equal(deepPlain.status, 200, 'the same depth without the rewrite renders its prompt without recursion and is served');
  t.equal(gw.proc.child.exitCode, null, 'the gateway is still running');
  const metrics = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(metrics, /infergate_requests_total\{[^}]*code="500"[^}]*\} 1/, 'the 500 is counted');
});
