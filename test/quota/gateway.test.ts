// Tenant quotas through a real gateway and real mock vLLM servers: the token names the tenant, each tenant is
// held to its own limits, answers carry OpenAI's x-ratelimit-* headers, a refusal is a 429 with Retry-After,
// a concurrency slot is freed when its request ends, and a stream's real usage is charged without the client
// seeing a usage chunk it did not ask for (the official openai SDK, both ways).
import t from 'tap';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { startGateway, gatewayConfig, runCli, ROOT } from '../helpers/process.js';
import { startMocks, scrape, metric, until } from '../e2e/support.js';

async function mint(sub: string): Promise<string> {
  const p = runCli(['token', '--sub', sub, '--models', '*', '--ttl', '10m']);
  t.equal(await p.exited(20_000), 0, p.stderr());
  return p.stdout().trim();
}

const demoAuth = (parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as { auth: { jwt: Record<string, unknown> } }).auth;
const alice = await mint('alice'); // the first mint makes the dev key pair if there is none yet
const bob = await mint('bob');
const carol = await mint('carol');
demoAuth.jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');
const mock = await startMocks(1, ['--model', 'test-model', '--time-scale', '20', '--seed', '5']);
t.teardown(() => mock.kill()); // registered at once: a gateway that fails to start must not leave it running
const gw = await startGateway(
  gatewayConfig(mock.endpoints, {
    over: {
      auth: demoAuth,
      tenants: {
        default: { requests_per_minute: 3 },
        overrides: { carol: { requests_per_minute: 1000, tokens_per_minute: 100 }, bob: { requests_per_minute: 1000, max_concurrent: 1, tokens_per_minute: 1_000_000 } },
      },
    },
  }),
);
t.teardown(() => gw.stop());

const chat = (token: string, body: Record<string, unknown> = {}, signal?: AbortSignal) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST', signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...body }),
  });

t.test('requests_per_minute: the 4th request in a minute is refused with 429, Retry-After and the headers', async (t) => {
  const remaining: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await chat(alice);
    t.equal(r.status, 200, `request ${i + 1}`);
    t.equal(r.headers.get('x-ratelimit-limit-requests'), '3');
    remaining.push(r.headers.get('x-ratelimit-remaining-requests') ?? '');
    t.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^\d+(\.\d+)?(ms|s)$|^\d+m\d+s$/, 'reset in OpenAI\'s duration form');
    await r.text();
  }
  t.same(remaining, ['2', '1', '0'], 'remaining counts down');
  const r = await chat(alice);
  t.equal(r.status, 429);
  t.ok(Number(r.headers.get('retry-after')) >= 1, `Retry-After ${r.headers.get('retry-after')}`);
  t.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
  const body = (await r.json()) as { error: { code: string; type: string; message: string } };
  t.match(body.error, { code: 'rate_limit_exceeded', type: 'rate_limit_error' });
  t.notMatch(body.error.message, /eyJ/, 'the token is not echoed');
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'rate_limited' }), 1, 'counted as rate_limited');
  const other = await chat(bob);
  t.equal(other.status, 200, 'another tenant has its own limits');
  await other.text();
});

t.test('max_concurrent: a second request waits for no slot, the slot frees when the first ends (even aborted)', async (t) => {
  const ac = new AbortController();
  const long = await chat(bob, { stream: true, max_tokens: 20_000 }, ac.signal);
  t.equal(long.status, 200, 'the long stream holds bob\'s one slot');
  const second = await chat(bob);
  t.equal(second.status, 429, 'a second request at once: refused');
  t.match(((await second.json()) as { error: { message: string } }).error.message, /concurren/i);
  ac.abort(); // the client hangs up: the lease goes with the request
  await long.body?.cancel().catch(() => undefined);
  const ok = await until(async () => {
    const r = await chat(bob);
    await r.text();
    return r.status === 200;
  }, 10_000, 'bob\'s slot to be free again');
  t.ok(ok, 'after the abort, bob is served again');
});

t.test('a stream is charged its real usage; the client sees a usage chunk only when it asks (openai SDK)', async (t) => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: bob, maxRetries: 0 });
  const read = async (includeUsage: boolean) => {
    const stream = await client.chat.completions.create({
      model: 'test-model', messages: [{ role: 'user', content: 'Count to five.' }], max_tokens: 12, stream: true,
      ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
  };
  const plain = await read(false);
  t.ok(plain.length > 1, 'a stream');
  t.notOk(plain.some((c) => c.usage), 'not asked: no usage chunk reaches the client (the gateway asked upstream and kept it)');
  t.notOk(plain.some((c) => c.choices.length === 0), 'no empty-choices chunk either');
  const withUsage = await read(true);
  const u = withUsage.find((c) => c.usage)?.usage;
  t.ok(u && u.completion_tokens === 12 && u.prompt_tokens > 0, `asked: the usage chunk arrives (${JSON.stringify(u)})`);
  // carol may use 100 tokens a minute: a stream that did not ask for usage is charged what it really used
  // (about 10 prompt + 60 completion tokens), not the prompt estimate alone (a few tokens)
  const c = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: carol, maxRetries: 0 });
  const stream = await c.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Count to five.' }], max_tokens: 60, stream: true });
  let sawUsage = false;
  for await (const chunk of stream) sawUsage ||= !!chunk.usage;
  t.notOk(sawUsage, 'no usage chunk for carol either');
  const r = await chat(carol, { max_tokens: 1 });
  t.equal(r.headers.get('x-ratelimit-limit-tokens'), '100');
  const left = Number(r.headers.get('x-ratelimit-remaining-tokens'));
  t.ok(left <= 40, `the stream's real usage was charged: ${left} of 100 tokens left (the estimate alone would leave about 90)`);
  await r.text();
});
