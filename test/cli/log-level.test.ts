// LOG_LEVEL wins over the config's logging.level, as `infergate --help` says: the same config logs an access
// line per request with LOG_LEVEL=info and none without it (its own level is warn).
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(CHAT_JSON));
t.teardown(() => up.close());
const config = gatewayConfig([up.endpoint], { over: { logging: { level: 'warn', access_log: true } } });

async function served(url: string): Promise<void> {
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chatBody({ user: 'marker' }), headers: { 'content-type': 'application/json' } });
  await r.body.text();
  t.equal(r.statusCode, 200);
}

t.test('LOG_LEVEL=info over logging.level: warn → the access line is written', async (t) => {
  const gw = await startGateway(config, { LOG_LEVEL: 'info' });
  t.teardown(() => gw.stop());
  await served(gw.url);
  await until(() => gw.proc.stdout().includes('"msg":"request"'), 5_000, 'the access line');
  t.pass('access line written');
});

t.test('no LOG_LEVEL → the config\'s warn holds: no access line', async (t) => {
  const env = { LOG_LEVEL: undefined } as unknown as NodeJS.ProcessEnv;
  const gw = await startGateway(config, env);
  await served(gw.url);
  await served(gw.url);
  // the access line is written before the answer ends, so once both answers are in, it would be there
  await gw.stop();
  t.notMatch(gw.proc.stdout(), /"msg":"request"/, 'no access line');
  t.match(gw.proc.stdout(), /listening on/, 'the process ran and printed its start');
});
