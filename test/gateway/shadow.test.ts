// shadow_policy: a second policy decides beside the serving one, is counted, and never changes who serves.
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startUpstream, CHAT_JSON, chatBody } from '../helpers/upstream.js';

const reply = (_req: unknown, res: import('node:http').ServerResponse) =>
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(CHAT_JSON) }).end(CHAT_JSON);
const a = await startUpstream(reply);
const b = await startUpstream(reply);
const gw = await startGateway(gatewayConfig([a.endpoint, b.endpoint], { pool: { policy: 'round_robin', shadow_policy: 'scored' } }));
t.teardown(async () => {
  await gw.stop();
  await a.close();
  await b.close();
});

t.test('every request is decided by the shadow policy too; round-robin still serves', async (t) => {
  const served: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
    await res.body.text();
    t.equal(res.statusCode, 200);
    served.push(String(res.headers['x-infergate-endpoint']));
  }
  t.equal(new Set(served).size, 2, 'round-robin alternates between both upstreams');
  const text = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  const counts = [...text.matchAll(/^infergate_shadow_picks_total\{[^}]*policy="scored"[^}]*\} (\d+)$/gm)].map((m) => Number(m[1]));
  t.equal(counts.reduce((x, y) => x + y, 0), 6, 'six shadow decisions counted');
});
