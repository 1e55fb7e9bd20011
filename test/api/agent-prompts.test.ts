// An agent's requests through a quota'd gateway with the official openai SDK: the function schemas in
// `tools` and the arguments of earlier `tool_calls` are part of the prompt a model server reads (its chat
// template renders them), so they weigh on the estimate the quota charges and the pick uses, and two agents
// with other tools do not share a prefix.
import t from 'tap';
import OpenAI from 'openai';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startMocks } from '../e2e/support.js';
import { demoAuth, mint } from './support.js';

const LIMIT = 200_000;
// minted before the gateway starts: the first token makes the dev key pair its key set names, if none yet
await mint(['--sub', 'agent', '--models', '*', '--ttl', '10m']);
const mocks = await startMocks(2, ['--model', 'agent-model', '--time-scale', '20', '--seed', '6']);
t.teardown(() => mocks.kill());
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, {
    pool: { policy: 'scored' },
    over: { auth: demoAuth(), models: [{ name: 'agent-model', pool: 'p' }], tenants: { default: { requests_per_minute: 1000, tokens_per_minute: LIMIT } } },
  }),
);
t.teardown(() => gw.stop());

/** `n` function schemas of about 1 KB each, named after `tag`. */
function tools(n: number, tag: string): OpenAI.Chat.Completions.ChatCompletionTool[] {
  return Array.from({ length: n }, (_, i) => ({
    type: 'function',
    function: {
      name: `${tag}_tool_${i}`,
      description: `Tool ${i} of ${tag}: ${'does a careful, well-described thing with its inputs. '.repeat(12)}`,
      parameters: { type: 'object', properties: { path: { type: 'string', description: 'the file to act on' }, count: { type: 'integer' } }, required: ['path'] },
    },
  }));
}

/** What a fresh tenant is charged at admission for `req` (its estimate), and the server's own prompt tokens. */
async function charged(sub: string, req: OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming) {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: await mint(['--sub', sub, '--models', '*', '--ttl', '10m']), maxRetries: 0 });
  const { data, response } = await client.chat.completions.create(req).withResponse();
  return { estimate: LIMIT - Number(response.headers.get('x-ratelimit-remaining-tokens')), served: data.usage!.prompt_tokens, endpoint: response.headers.get('x-infergate-endpoint') };
}

const question = [{ role: 'user' as const, content: 'Rename the config file and update its references.' }];

t.test('the tools weigh what the server reads of them', async (t) => {
  const bare = await charged('a0', { model: 'agent-model', max_tokens: 4, messages: question });
  const withTools = await charged('a1', { model: 'agent-model', max_tokens: 4, messages: question, tools: tools(40, 'fs') });
  t.ok(withTools.estimate - bare.estimate > 8000, `40 schemas of ~900 characters: ${withTools.estimate - bare.estimate} tokens more in the estimate`);
  t.equal(withTools.served, withTools.estimate, 'the mock server counts them alike');
});

t.test('an earlier tool call\'s arguments weigh too', async (t) => {
  const args = JSON.stringify({ path: 'src/config.yaml', content: 'key: value\n'.repeat(2000) });
  const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    ...question,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'write_file', arguments: args } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
  ];
  const r = await charged('b1', { model: 'agent-model', max_tokens: 4, messages: history });
  t.ok(r.estimate > args.length / 4, `${r.estimate} tokens for a history holding ${args.length} characters of arguments`);
  t.equal(r.served, r.estimate, 'the mock server counts them alike');
});

t.test('the same tools again: matched where they were sent; another agent\'s tools are another prefix', async (t) => {
  /** The newest routing decision: the blocks its prompt was cut into, and what the chosen endpoint matched of them. */
  const lastDecision = async () => {
    const d = ((await (await fetch(`${gw.adminUrl}/debug/decisions?n=1`)).json()) as { decisions: Array<{ endpoint: string; prompt_blocks: number; candidates: Array<{ endpoint: string; matched_blocks: number }> }> }).decisions[0];
    return { blocks: d.prompt_blocks, matched: Math.max(...d.candidates.map((c) => c.matched_blocks)), chosen: d.candidates.find((c) => c.endpoint === d.endpoint)!.matched_blocks };
  };
  const mine = tools(30, 'mine');
  const first = await charged('c1', { model: 'agent-model', max_tokens: 4, messages: question, tools: mine });
  const again = await charged('c2', { model: 'agent-model', max_tokens: 4, messages: [{ role: 'user', content: 'Now list the tests.' }], tools: mine });
  const d = await lastDecision();
  t.ok(d.chosen > 0.9 * d.blocks, `a new question with the same tools: ${d.chosen} of ${d.blocks} blocks matched`);
  t.equal(again.endpoint, first.endpoint, `on the pod that holds them (${first.endpoint})`);
  await charged('c3', { model: 'agent-model', max_tokens: 4, messages: question, tools: tools(30, 'theirs') });
  const other = await lastDecision();
  t.ok(other.matched < 0.05 * other.blocks, `another agent's tools: ${other.matched} of ${other.blocks} blocks matched anywhere`);
});
