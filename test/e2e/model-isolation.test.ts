// Two models on one pool (a base model and a LoRA adapter of it) never share prefix-index entries: the same
// prompt text under another model is new to the index (its KV blocks differ on the server too), while an
// alias of the same model shares them. Observed through /debug/pools' index stats and placement.
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, debugPools, longText } from './support.js';

const mocks = await startMocks(2, ['--model', 'base', '--lora', 'a', '--time-scale', '20', '--seed', '6']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, {
    pool: { policy: 'scored' },
    over: {
      models: [
        { name: 'base', pool: 'p' },
        { name: 'a', pool: 'p' },
        { name: 'base-alias', targets: [{ model: 'base', weight: 1 }] },
      ],
    },
  }),
);
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

const system = longText('shared-text', 4096); // 64 blocks of 64 chars
const ask = (model: string) =>
  chat(gw.url, { model, max_tokens: 4, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'system', content: system }, { role: 'user', content: 'Hi.' }] });
const index = async () => (await debugPools(gw)).p.index;
const cachedTokens = (body: string) => {
  const m = /"cached_tokens":(\d+)/.exec(body);
  return m ? Number(m[1]) : NaN;
};

t.test('the same prompt under another model gets no prefix entries from the first', async (t) => {
  t.same(await index(), { ...(await index()), blocks: 0, nodes: 0 }, 'the index starts empty');
  const b1 = await ask('base');
  t.equal(b1.status, 200);
  const afterBase = await index();
  t.ok(afterBase.blocks >= 64 && afterBase.nodes > 0, `base's prompt: ${afterBase.blocks} blocks indexed (${afterBase.nodes} nodes)`);

  const alias = await ask('base-alias');
  t.equal(alias.status, 200);
  t.same((await index()).nodes, afterBase.nodes, 'an alias of base (same model forwarded) adds no new nodes: it shares them');
  t.equal(alias.endpoint, b1.endpoint, 'and it is placed by affinity on the pod that holds the prefix');
  t.ok(cachedTokens(alias.body) >= 1000, `that pod served it from cache (${cachedTokens(alias.body)} cached tokens)`);

  const a1 = await ask('a');
  t.equal(a1.status, 200);
  const afterA = await index();
  t.equal(afterA.nodes, 2 * afterBase.nodes, `model a added its own ${afterA.nodes - afterBase.nodes} nodes: none were shared with base`);
  t.equal(afterA.blocks, 2 * afterBase.blocks, `and ${afterA.blocks - afterBase.blocks} blocks`);
  t.equal(cachedTokens(a1.body), 0, `the server had nothing cached for a either (served by ${a1.endpoint})`);
});
