// Prefix affinity as a user sees it: a shared long system prompt keeps landing on the pod whose KV cache
// holds it (and that pod's prefix-cache hit counter rises), while different prefixes spread over the pool.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, longText, mockMetric, countBy } from './support.js';

const mocks = await startMocks(4, ['--model', 'test-model', '--time-scale', '20', '--seed', '1']);
const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored' } }));
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

function ask(system: string, user: string) {
  return chat(gw.url, { model: 'test-model', max_tokens: 4, messages: [{ role: 'system', content: system }, { role: 'user', content: user }] });
}

t.test('sequential requests sharing a long system prompt stay on one endpoint and hit its cache', async (t) => {
  const system = longText('sticky', 6000); // ≈ 1500 tokens
  const first = await ask(system, 'Question number 0: what is the weather like?');
  t.equal(first.status, 200);
  const home = first.endpoint!;
  t.ok(mocks.endpoints.includes(home), `x-infergate-endpoint names a pool endpoint (${home})`);
  const hitsBefore = await mockMetric(home, 'vllm:prefix_cache_hits_total');
  const served: string[] = [];
  for (let i = 1; i <= 8; i++) {
    const r = await ask(system, `Question number ${i}: tell me about topic ${i * 7}.`);
    t.equal(r.status, 200);
    served.push(r.endpoint!);
  }
  t.same(countBy(served), new Map([[home, 8]]), 'all eight follow-ups went to the first endpoint');
  const hitsAfter = await mockMetric(home, 'vllm:prefix_cache_hits_total');
  // each follow-up finds ≈ 1500 cached tokens of system prompt on that server
  t.ok(hitsAfter - hitsBefore >= 8 * 1000, `prefix cache hits rose by ${hitsAfter - hitsBefore} tokens on ${home}`);
  for (const ep of mocks.endpoints.filter((e) => e !== home)) {
    t.equal(await mockMetric(ep, 'vllm:prefix_cache_hits_total'), 0, `no cache hits on ${ep}`);
  }
});

t.test('different long prefixes spread over the endpoints, each then sticking to its own', async (t) => {
  const systems = Array.from({ length: 8 }, (_, i) => longText(`tenant-${i}`, 5000));
  const firstHome: string[] = [];
  for (const s of systems) {
    const r = await ask(s, 'Hello.');
    t.equal(r.status, 200);
    firstHome.push(r.endpoint!);
  }
  const used = new Set(firstHome);
  t.ok(used.size >= 2, `8 distinct prefixes used ${used.size} endpoints: ${[...countBy(firstHome).values()].join('/')}`);
  for (let i = 0; i < systems.length; i++) {
    const r = await ask(systems[i], 'And a follow-up.');
    t.equal(r.endpoint, firstHome[i], `prefix ${i} came back to ${firstHome[i]}`);
  }
});

t.test(
  'a short prompt (the size of the demo\'s, under 4 blocks of 64 chars) repeated sticks to one endpoint',
  async (t) => {
    const served: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await ask('You are a helpful assistant for short questions.', 'Say hello, please, in one word.');
      t.equal(r.status, 200);
      served.push(r.endpoint!);
    }
    t.equal(new Set(served).size, 1, `8 identical short requests went to ${JSON.stringify([...countBy(served)])}`);
  },
);

t.test('a prompt just over 4 blocks of 64 chars repeated sticks to one endpoint', async (t) => {
  const system = longText('just-over', 300);
  const served: string[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await ask(system, 'Same question.');
    t.equal(r.status, 200);
    served.push(r.endpoint!);
  }
  t.equal(new Set(served).size, 1, `8 identical requests went to ${JSON.stringify([...countBy(served)])}`);
});
