// LoRA affinity: servers hold one adapter at a time (--max-loras 1). Once adapter `a` runs on one pod and
// `b` on the other (as vllm:lora_requests_info shows), further `a` requests go to the pod with `a` loaded
// and `b` requests to the one with `b`, instead of forcing an adapter swap.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, debugPools, scrape, until, type ChatResult } from './support.js';

const mocks = await startMocks(2, ['--model', 'base', '--lora', 'a,b', '--max-loras', '1', '--time-scale', '10', '--seed', '4']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, {
    pool: { policy: 'scored' },
    over: { models: [{ name: 'base', pool: 'p' }, { name: 'a', pool: 'p' }, { name: 'b', pool: 'p' }] },
  }),
);
const background = new AbortController();
t.teardown(async () => {
  background.abort();
  await gw.stop();
  await mocks.kill();
});

/**
 * A streaming request that keeps its adapter running for the whole test (100,000 tokens: minutes even at
 * time-scale 10, so a loaded machine cannot see it end early); resolves once its headers arrived.
 */
async function longStream(model: string): Promise<{ endpoint: string; done: Promise<unknown> }> {
  const r = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST', signal: background.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, max_tokens: 100_000, messages: [{ role: 'user', content: `keep ${model} busy` }] }),
  });
  if (r.status !== 200) throw new Error(`long ${model} request: ${r.status}`);
  return { endpoint: r.headers.get('x-infergate-endpoint')!, done: r.text().catch(() => undefined) };
}

async function loraRunning(endpoint: string): Promise<string> {
  const s = (await scrape(`http://${endpoint}`)).find((x) => x.name === 'vllm:lora_requests_info');
  return s?.labels.running_lora_adapters ?? '';
}

const pool = async () => (await debugPools(gw)).p.endpoints;
/**
 * The gateway's last scrape shows `want` sequences running and none waiting on each endpoint: no leftover
 * of a request that just ended (a scrape that caught it queued would count it as foreign waiting work).
 */
const settled = (want: Record<string, number>) =>
  until(
    async () => (await pool()).every((e) => !e.stale && e.signals?.running === want[e.endpoint] && e.signals.waiting === 0 && e.in_flight === want[e.endpoint]),
    5_000,
    `running ${JSON.stringify(want)}, nothing waiting`,
  );

const seenByGateway = async (endpoint: string, adapter: string) =>
  (await debugPools(gw)).p.endpoints.find((e) => e.endpoint === endpoint)?.signals?.loraRunning.includes(adapter);

t.test('adapter requests go to the pod where that adapter is running', async (t) => {
  const A = await longStream('a');
  t.equal(await until(() => loraRunning(A.endpoint), 5_000, 'a running'), 'a', `${A.endpoint} reports running_lora_adapters="a"`);
  await until(() => seenByGateway(A.endpoint, 'a'), 5_000, 'the gateway sees a running');
  const B = await longStream('b');
  t.not(B.endpoint, A.endpoint, `b went to the other pod (${B.endpoint}), not the one whose only slot holds a`);
  t.equal(await until(() => loraRunning(B.endpoint), 5_000, 'b running'), 'b', `${B.endpoint} reports running_lora_adapters="b"`);
  await until(() => seenByGateway(B.endpoint, 'b'), 5_000, 'the gateway sees b running');

  const results: Array<ChatResult & { model: string }> = [];
  for (let i = 0; i < 6; i++) {
    for (const model of ['a', 'b']) {
      // equal load on both pods, as the gateway sees it: only the adapters differ
      await settled({ [A.endpoint]: 1, [B.endpoint]: 1 });
      const before = await pool();
      const r = await chat(gw.url, { model, max_tokens: 4, messages: [{ role: 'user', content: `question ${i} for ${model}` }] });
      results.push({ ...r, model });
      if (r.endpoint !== (model === 'a' ? A.endpoint : B.endpoint)) t.comment(`${model} request ${i} went to ${r.endpoint}; pools just before: ${JSON.stringify(before)}`);
    }
  }
  t.ok(results.every((r) => r.status === 200 && r.complete), 'all 12 short requests answered');
  t.same(results.filter((r) => r.model === 'a').map((r) => r.endpoint), Array(6).fill(A.endpoint), `all 6 a requests went to ${A.endpoint}`);
  t.same(results.filter((r) => r.model === 'b').map((r) => r.endpoint), Array(6).fill(B.endpoint), `all 6 b requests went to ${B.endpoint}`);
  const st = (await (await fetch(`http://${A.endpoint}/mock/state`)).json()) as { loraResident: string[] };
  t.same(st.loraResident, ['a'], 'the a pod never had to swap its adapter');
  pods = { A: A.endpoint, B: B.endpoint };
});

let pods: { A: string; B: string } | undefined;

t.test(
  'one more running sequence on the a pod does not send an a request to the pod whose only slot holds b',
  async (t) => {
    t.ok(pods, 'the previous test left a running on one pod and b on the other');
    if (!pods) return;
    const A2 = await longStream('a');
    t.equal(A2.endpoint, pods.A, 'a second long a request joins the a pod');
    await settled({ [pods.A]: 2, [pods.B]: 1 });
    // on the b pod this request waits until the long b request ends (seconds); on the a pod it starts at once
    const t0 = Date.now();
    const pending = chat(gw.url, { model: 'a', max_tokens: 4, messages: [{ role: 'user', content: 'one more for a' }] }, AbortSignal.timeout(3_000));
    // on the a pod it is answered at once; sent to the b pod it would still be waiting when the 3 s abort fires
    const r = await pending;
    t.equal(r.status, 200, `answered 200 (${r.error ? String(r.error) : r.endpoint})`);
    t.equal(r.endpoint, pods.A, `sent to the a pod (${pods.A}); the b pod is ${pods.B}`);
    t.ok(Date.now() - t0 < 1_000, `answered in ${Date.now() - t0} ms`);
  },
);
