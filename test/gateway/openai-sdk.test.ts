// The official openai SDK, streaming through the gateway to real mock vLLM servers, sees what it would see
// talking to the server directly.
import t from 'tap';
import OpenAI from 'openai';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startMocks } from '../e2e/support.js';

// K mock servers on consecutive ports (retried if another process takes one meanwhile)
const mock = await startMocks(2, ['--model', 'test-model', '--time-scale', '20', '--seed', '7']);
const endpoints = mock.endpoints;
const gw = await startGateway(gatewayConfig(endpoints, { pool: { policy: 'scored' } }));
t.teardown(async () => {
  await gw.stop();
  await mock.kill();
});

const messages = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Name three colours.' },
];

async function streamText(baseURL: string) {
  const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'unused', maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'test-model', messages, max_tokens: 24, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  let finish: string | null | undefined;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (c?.delta?.content) text += c.delta.content;
    if (c?.finish_reason) finish = c.finish_reason;
  }
  return { text, usage, finish, chunks };
}

t.test('a streamed chat completion through the gateway equals one straight from the server', async (t) => {
  const via = await streamText(gw.url);
  const direct = await streamText(`http://${endpoints[0]}`);
  t.ok(via.text.length > 0, 'some text arrived');
  t.equal(via.text, direct.text, 'same text (same seed)');
  t.equal(via.finish, 'length');
  t.equal(via.usage?.completion_tokens, 24, 'usage chunk arrived intact');
  t.equal(via.chunks, direct.chunks, 'same number of chunks');
});

t.test('non-streaming completions and models list through the SDK', async (t) => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const res = await client.completions.create({ model: 'test-model', prompt: 'Once upon a time', max_tokens: 8 });
  t.equal(res.object, 'text_completion');
  t.equal(res.usage?.completion_tokens, 8);
  const models = await client.models.list();
  t.ok(models.data.some((m) => m.id === 'test-model'));
  const err = await client.chat.completions.create({ model: 'missing', messages }).catch((e: unknown) => e);
  t.ok(err instanceof OpenAI.NotFoundError, 'unknown model is a NotFoundError in the SDK');
});
