// The start line names the address the gateway is bound to: 0.0.0.0 (every interface) is printed as such,
// not as 127.0.0.1, so an operator sees that the port is open beyond loopback.
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig } from '../helpers/process.js';

t.test('listen.host 0.0.0.0 is printed as bound', async (t) => {
  const gw = await startGateway(gatewayConfig(['127.0.0.1:1'], { over: { listen: { host: '0.0.0.0', port: 0 } } }));
  t.teardown(() => gw.stop());
  const m = /^listening on http:\/\/0\.0\.0\.0:(\d+)$/m.exec(gw.proc.stdout());
  t.ok(m, `the line says 0.0.0.0: ${gw.proc.stdout().split('\n').find((l) => l.startsWith('listening'))}`);
  const r = await request(`http://127.0.0.1:${m![1]}/v1/models`);
  t.equal(r.statusCode, 200, 'and it answers on loopback');
  await r.body.text();
});
