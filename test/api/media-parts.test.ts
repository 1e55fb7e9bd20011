// Images in chat messages (a vision model behind the gateway), sent with the official openai SDK: a base64
// image weighs as an image, not as its characters (a 512 KB data URL counted as text would be 175k tokens
// and refused by a 20k tokens-per-minute quota), as much as its pool's media_tokens says; the same image
// asked about again goes to the pod that has it cached, and the mock server counts it as a model server would.
import t from 'tap';
import OpenAI from 'openai';
import { startGateway, gatewayConfig } from '../helpers/process.js';
import { startMocks } from '../e2e/support.js';
import { demoAuth, mint } from './support.js';

const token = await mint(['--sub', 'vision-user', '--models', '*', '--ttl', '10m']);
const mocks = await startMocks(2, ['--model', 'vlm', '--lora', 'vlm-hires', '--time-scale', '20', '--seed', '4']);
t.teardown(() => mocks.kill());
const cfg = gatewayConfig(mocks.endpoints, {
  pool: { policy: 'scored' },
  over: { auth: demoAuth(), models: [{ name: 'vlm', pool: 'p' }, { name: 'vlm-hires', pool: 'q' }], tenants: { default: { requests_per_minute: 1000, tokens_per_minute: 20_000 } } },
});
// the same servers, for a model whose images cost 4,000 tokens each
(cfg.pools as Record<string, unknown>).q = { endpoints: mocks.endpoints, media_tokens: 4000 };
const gw = await startGateway(cfg);
t.teardown(() => gw.stop());

/** A "PNG" of `bytes` bytes as a data URL, different for each seed. */
function image(bytes: number, seed: number): string {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) b[i] = (i * 131 + seed * 7919 + (i >> 7)) & 0xff;
  return `data:image/png;base64,${b.toString('base64')}`;
}

const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: token, maxRetries: 0 });

async function ask(url: string, question: string, model = 'vlm') {
  const { data, response } = await client.chat.completions
    .create({
      model,
      max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: question }] }],
    })
    .withResponse();
  return { data, endpoint: response.headers.get('x-infergate-endpoint'), remainingTokens: Number(response.headers.get('x-ratelimit-remaining-tokens')) };
}

t.test('a 512 KB image weighs about 1,000 tokens, not its 700k characters', async (t) => {
  const url = image(512 * 1024, 1);
  t.ok(url.length > 600_000, `${url.length} characters of data URL`);
  const a = await ask(url, 'What is in this picture?');
  t.ok(a.remainingTokens > 18_000, `the quota charged the estimate of an image: ${20_000 - a.remainingTokens} tokens`);
  const prompt = a.data.usage!.prompt_tokens;
  t.ok(prompt > 1000 && prompt < 1100, `the server counted ${prompt} prompt tokens`);
});

t.test('the same image again goes to the pod that holds it, and is served from its cache', async (t) => {
  const url = image(300 * 1024, 2);
  const first = await ask(url, 'Describe it.');
  const again = await ask(url, 'And the colours?');
  t.equal(again.endpoint, first.endpoint, `both on ${first.endpoint}`);
  const cached = again.data.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  t.ok(cached >= 1000, `${cached} cached tokens: the image was`);
  const other = await ask(image(300 * 1024, 3), 'Describe it.');
  t.ok((other.data.usage?.prompt_tokens_details?.cached_tokens ?? 0) < 100, 'another image of the same size is not taken for it');
});

t.test("a pool's media_tokens: what one image weighs there", async (t) => {
  /** The tokens a fresh tenant is charged at admission for a request with `images` images to `model`. */
  const charged = async (model: string, images: number, sub: string) => {
    const c = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: await mint(['--sub', sub, '--models', '*', '--ttl', '10m']), maxRetries: 0 });
    const content = [...Array.from({ length: images }, (_, i) => ({ type: 'image_url' as const, image_url: { url: image(64 * 1024, 10 + i) } })), { type: 'text' as const, text: 'What is it?' }];
    const { response } = await c.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content }] }).withResponse();
    return 20_000 - Number(response.headers.get('x-ratelimit-remaining-tokens'));
  };
  const text = await charged('vlm-hires', 0, 'm0');
  const one = await charged('vlm-hires', 1, 'm1');
  const two = await charged('vlm-hires', 2, 'm2');
  t.equal(one - text, 4000, `one image: 4,000 tokens (${one} in all)`);
  t.equal(two - text, 8000, 'two: 8,000');
  t.equal((await charged('vlm', 1, 'm3')) - text, 1024, 'the default pool: 1,024');
});
