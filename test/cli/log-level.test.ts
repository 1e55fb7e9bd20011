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

t.test('an unknown LOG_LEVEL stops the start, naming the levels', async (t) => {
  await t.rejects(startGateway(config, { LOG_LEVEL: 'loud' }), /LOG_LEVEL="loud" is not a level \(fatal, error, warn, info, debug, trace, silent\)/);
});

t.test('logging.format: json whatever the output; pretty through pino-pretty (a development dependency)', async (t) => {
  const json = await startGateway({ ...config, logging: { level: 'info', access_log: true, format: 'json' } });
  t.teardown(() => json.stop());
  await served(json.url);
  const line = await until(() => json.proc.stdout().split('\n').find((l) => l.includes('"msg":"request"')), 5_000, 'the JSON access line');
  t.match(JSON.parse(line!), { msg: 'request', status: 200 });
  const pretty = await startGateway({ ...config, logging: { level: 'info', access_log: true, format: 'pretty' } });
  t.teardown(() => pretty.stop());
  await served(pretty.url);
  // pino-pretty's line: time, level and message, then the fields indented one per line (no JSON object)
  // (no colours: the output is not a terminal)
  await until(() => /INFO[^\n]*request\n(?:\s+\w+: .*\n)*\s+status: 200\n/.test(pretty.proc.stdout()), 10_000, 'the pretty access line');
  t.notMatch(pretty.proc.stdout(), /"msg":"request"/, 'no JSON line');
});
