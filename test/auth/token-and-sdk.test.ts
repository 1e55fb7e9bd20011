// `infergate token` mints what a gateway with config/demo.yaml's auth accepts: the official openai SDK,
// given that token as its API key, streams a chat completion through the gateway from real mock vLLM
// servers; given a bad key or a model the token does not allow, it raises the SDK's own error classes.
import t from 'tap';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { startGateway, gatewayConfig, runCli, ROOT } from '../helpers/process.js';
import { startMocks } from '../e2e/support.js';

async function mint(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const p = runCli(['token', ...args]);
  const code = await p.exited(20_000);
  return { code, out: p.stdout().trim(), err: p.stderr() };
}

// the demo's auth section, with its key set named where it is (the path in the file is relative to it)
const demoAuth = (parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as { auth: { jwt: Record<string, unknown> } }).auth;
demoAuth.jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');

// minted first: it makes the dev key pair if there is none yet
const full = await mint(['--sub', 'alice', '--models', 'test-*', '--ttl', '10m', '--priority', 'sheddable']);
const mock = await startMocks(1, ['--model', 'test-model', '--time-scale', '20', '--seed', '3']);
const gw = await startGateway(gatewayConfig(mock.endpoints, { over: { auth: demoAuth } }));
t.teardown(async () => {
  await gw.stop();
  await mock.kill();
});

t.test('infergate token prints a JWT with the claims asked for', async (t) => {
  t.equal(full.code, 0, full.err);
  t.match(full.out, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'one compact JWT on stdout');
  const claims = decodeJwt(full.out);
  t.match(claims, { sub: 'alice', tenant: 'alice', models: ['test-*'], priority: 'sheddable', iss: 'infergate-dev', aud: 'infergate' });
  t.equal(claims.exp! - claims.iat!, 600, '--ttl 10m');
  t.match(decodeProtectedHeader(full.out), { alg: 'ES256', typ: 'JWT' });
  const bad = await mint(['--models', 'a']);
  t.equal(bad.code, 2, 'no --sub: usage error');
  t.match(bad.err, /--sub is required/);
  const badTtl = await mint(['--sub', 'a', '--ttl', 'forever']);
  t.equal(badTtl.code, 2);
  const badPrio = await mint(['--sub', 'a', '--priority', 'vip']);
  t.equal(badPrio.code, 2);
  t.match(badPrio.err, /critical, standard, sheddable/);
});

t.test('the openai SDK streams with the minted token as its API key', async (t) => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: full.out, maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'test-model', messages: [{ role: 'user', content: 'Name three colours.' }], max_tokens: 16, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  t.ok(text.length > 0, `text arrived: ${JSON.stringify(text.slice(0, 30))}`);
  t.equal(usage?.completion_tokens, 16);
});

t.test('the SDK\'s own errors: 401 AuthenticationError, 403 PermissionDeniedError', async (t) => {
  const bad = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: `${full.out}x`, maxRetries: 0 });
  const e401 = await bad.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
  t.type(e401, OpenAI.AuthenticationError);
  t.equal((e401 as InstanceType<typeof OpenAI.APIError>).code, 'invalid_token');
  const narrow = await mint(['--sub', 'bob', '--models', 'other-model']);
  const limited = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: narrow.out, maxRetries: 0 });
  const e403 = await limited.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
  t.type(e403, OpenAI.PermissionDeniedError);
  t.equal((e403 as InstanceType<typeof OpenAI.APIError>).code, 'model_not_allowed');
});
