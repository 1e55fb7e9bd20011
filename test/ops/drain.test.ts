// A graceful stop as a user sees it: during the drain /readyz answers 503 "draining" while a stream is still
// open and the admin port keeps answering until the process exits; a stream the drain timeout cuts ends with
// an SSE error event whose code is shutting_down (not a model-server failure), and is logged as such.
import t from 'tap';
import { startGateway, startMocks, gatewayConfig, until, type RunningGateway } from '../e2e/support.js';

const mocks = await startMocks(1, ['--model', 'test-model', '--decode-ms', '20']);
t.teardown(() => mocks.kill());

/** A streamed chat request read as it arrives: its text so far, and whether it has ended. */
function openStream(gw: RunningGateway, maxTokens: number) {
  const s = { text: '', ended: false, status: 0, done: undefined as unknown as Promise<void> };
  s.done = (async () => {
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: maxTokens, messages: [{ role: 'user', content: 'tell me a long story' }] }),
      signal: AbortSignal.timeout(60_000),
    });
    s.status = r.status;
    const dec = new TextDecoder();
    for await (const chunk of r.body!) s.text += dec.decode(chunk as Uint8Array, { stream: true });
    s.ended = true;
  })();
  return s;
}

async function get(url: string): Promise<{ status: number; body: string } | null> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return { status: r.status, body: await r.text() };
  } catch {
    return null; // refused: nothing listens any more
  }
}

t.test('drain: /readyz says draining while a stream is open, the stream completes, the admin port answers until exit', async (t) => {
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { over: { limits: { drain_timeout: '30s' } } }));
  t.teardown(() => gw.stop());
  await until(async () => (await get(`${gw.adminUrl}/readyz`))?.status === 200, 10_000, 'ready');
  // about 300 decode steps of 21 ms: several seconds of stream
  const s = openStream(gw, 300);
  await until(() => s.text.includes('data: {'), 10_000, 'the first streamed event');
  gw.proc.child.kill('SIGTERM');
  const during = await until(async () => {
    const r = await get(`${gw.adminUrl}/readyz`);
    return r && r.status === 503 ? r : undefined;
  }, 5_000, '/readyz to answer 503');
  t.equal(s.ended, false, 'the stream is still open');
  t.match(JSON.parse(during.body), { status: 'draining', in_flight: 1 }, '/readyz: 503 draining, one request in flight');
  t.equal((await get(`${gw.adminUrl}/healthz`))?.status, 200, '/healthz still answers during the drain');
  const state = JSON.parse((await get(`${gw.adminUrl}/debug/state`))!.body) as { draining: boolean; ready: boolean };
  t.match(state, { draining: true, ready: false }, '/debug/state shows the drain');
  const metrics = await get(`${gw.adminUrl}/metrics`);
  t.match(metrics?.body, /^infergate_ready 0$/m, 'infergate_ready 0 while draining');
  await s.done;
  t.equal(s.status, 200, 'status 200');
  t.match(s.text, /data: \[DONE\]\n\n$/, 'the stream completed');
  t.notMatch(s.text, /"error"/, 'without an error');
  t.equal(await gw.proc.exited(10_000), 0, 'exit code 0');
  t.equal(await get(`${gw.adminUrl}/healthz`), null, 'the admin port is closed once the process has exited');
});

t.test('drain timeout: a cut stream ends with an error event code shutting_down, logged as a shutdown cut', async (t) => {
  const gw = await startGateway(
    gatewayConfig(mocks.endpoints, { over: { limits: { drain_timeout: '300ms' }, logging: { level: 'info', access_log: false } } }),
  );
  t.teardown(() => gw.stop());
  await until(async () => (await get(`${gw.adminUrl}/readyz`))?.status === 200, 10_000, 'ready');
  const s = openStream(gw, 5_000); // far longer than the drain timeout
  await until(() => s.text.includes('data: {'), 10_000, 'the first streamed event');
  // a non-streamed request still waiting for its answer when the drain ends
  const plain = fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test-model', max_tokens: 5_000, messages: [{ role: 'user', content: 'and another' }] }),
    signal: AbortSignal.timeout(30_000),
  }).then(async (r) => ({ status: r.status, body: await r.text() }));
  await until(async () => {
    const r = JSON.parse((await get(`${gw.adminUrl}/debug/state`))!.body) as { in_flight: number };
    return r.in_flight === 2;
  }, 5_000, 'both requests in flight');
  gw.proc.child.kill('SIGTERM');
  await s.done;
  const events = s.text.trimEnd().split('\n\n');
  const last = JSON.parse(events[events.length - 1].replace(/^data: /, '')) as { error?: { code: string; message: string } };
  t.equal(last.error?.code, 'shutting_down', 'the last event is an error with code shutting_down');
  t.match(last.error?.message, /shutting down/, 'its message says the gateway is shutting down');
  t.notMatch(s.text, /data: \[DONE\]/, 'no [DONE]: the answer is incomplete');
  const p = await plain;
  t.equal(p.status, 503, 'the request still waiting for its answer: 503');
  t.equal((JSON.parse(p.body) as { error: { code: string } }).error.code, 'shutting_down', 'code shutting_down');
  t.equal(await gw.proc.exited(10_000), 0, 'exit code 0');
  const logs = gw.proc.stdout();
  t.equal(logs.match(/"msg":"request cut by shutdown"/g)?.length, 2, 'both cut requests logged as cut by the shutdown');
  t.match(logs, /"code":"shutting_down"/, 'with code shutting_down');
  t.notMatch(logs, /upstream failed mid-answer/, 'not as a model-server failure');
});
