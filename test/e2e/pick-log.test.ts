// config/gateway.yaml documents `logging.level: debug` as "debug logs every pick with its scores": an
// operator turning debug on should see, per request, which endpoint won and each candidate's scores.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, until } from './support.js';

const mocks = await startMocks(2, ['--model', 'test-model', '--time-scale', '20', '--seed', '8']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, { pool: { policy: 'scored' }, over: { logging: { level: 'debug', access_log: true } } }),
);
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

// (a product bug until 6a1183c: the gateway never asked the router for explain, so nothing was logged)
t.test(
  'logging.level debug logs each pick with its scores',
  async (t) => {
    const r = await chat(gw.url, { model: 'test-model', max_tokens: 2, messages: [{ role: 'user', content: 'which pod?' }] });
    t.equal(r.status, 200);
    await until(() => /"msg":"request"/.test(gw.proc.stdout()), 3_000, 'the access-log line');
    const lines = gw.proc.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);
    const pick = lines.find((l) => l.msg === 'pick');
    t.ok(pick, 'a "pick" log line');
    t.equal(pick?.endpoint, r.endpoint, 'naming the endpoint that served the request');
    t.equal(pick?.explain?.candidates?.length, 2, 'with both candidates and their scores');
  },
);
