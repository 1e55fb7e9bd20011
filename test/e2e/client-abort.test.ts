// A client that hangs up mid-answer frees the model server's capacity: the gateway cancels the upstream
// request, so vllm:num_requests_running drops back to 0 and the server counts an abort.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, debugPools, mockMetric, until } from './support.js';

const mocks = await startMocks(1, ['--model', 'test-model', '--time-scale', '10', '--seed', '7']);
const ep = mocks.endpoints[0];
const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored' } }));
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

const running = () => mockMetric(ep, 'vllm:num_requests_running');
const aborts = () => mockMetric(ep, 'vllm:request_success_total', { finished_reason: 'abort' });
const longBody = (stream: boolean) =>
  JSON.stringify({ model: 'test-model', stream, max_tokens: 30_000, messages: [{ role: 'user', content: 'Write a very long story.' }] });

t.test('streaming: abort after some tokens arrived', async (t) => {
  const before = await aborts();
  const ac = new AbortController();
  const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: longBody(true), signal: ac.signal });
  t.equal(r.status, 200);
  t.equal(r.headers.get('content-type')?.split(';')[0], 'text/event-stream');
  const reader = r.body!.getReader();
  let text = '';
  while ((text.match(/^data: /gm) ?? []).length < 5) {
    const n = await reader.read();
    if (n.done) break;
    text += Buffer.from(n.value).toString();
  }
  t.ok((text.match(/^data: /gm) ?? []).length >= 5, 'tokens were streaming');
  t.equal(await running(), 1, 'the server is running the request');
  ac.abort();
  await reader.read().catch(() => undefined);
  await until(async () => (await running()) === 0, 3_000, 'num_requests_running back to 0');
  t.pass('vllm:num_requests_running is 0 again');
  t.equal(await aborts(), before + 1, 'the server counted one finished_reason="abort"');
  await until(async () => (await debugPools(gw)).p.endpoints[0].in_flight === 0, 3_000, 'gateway in_flight 0');
  t.pass('the gateway no longer counts it in flight');
});

t.test('non-streaming: abort while the server is generating', async (t) => {
  const before = await aborts();
  const ac = new AbortController();
  const pending = fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: longBody(false), signal: ac.signal }).then(
    (r) => r.text(),
    (e: Error) => e.name,
  );
  await until(async () => (await running()) === 1, 3_000, 'the server running it');
  ac.abort();
  t.equal(await pending, 'AbortError');
  await until(async () => (await running()) === 0, 3_000, 'num_requests_running back to 0');
  t.pass('vllm:num_requests_running is 0 again');
  t.equal(await aborts(), before + 1, 'the server counted one more abort');
  await until(async () => (await debugPools(gw)).p.endpoints[0].in_flight === 0, 3_000, 'gateway in_flight 0');
  t.pass('the gateway no longer counts it in flight');
});
