// Near-limit prompts through a real gateway: the gateway renders only the head of a prompt that the prefix
// index reads, yet what the client sent reaches the model server byte for byte and the token estimate in
// the access log is the whole prompt's (as renderPrompt of the whole body would give).
import t from 'tap';
import { request } from 'undici';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startUpstream } from '../helpers/upstream.js';
import { renderPrompt } from '../../src/openai/prompt.js';

const COMPLETION = JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'test-model', choices: [{ index: 0, text: 'ok', finish_reason: 'length' }] });
const up = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) }).end(COMPLETION));
const gw = await startGateway(gatewayConfig([up.endpoint], { over: { logging: { level: 'info', access_log: true }, limits: { max_body_bytes: '6mb' } } }));
t.teardown(async () => {
  await gw.stop();
  await up.close();
});

/** The access-log line of the request with this id. */
async function accessLine(id: string): Promise<{ status: number; prompt_tokens_est?: number }> {
  return until(() => {
    for (const line of gw.proc.stdout().split('\n')) {
      if (!line.includes(id) || !line.includes('"msg":"request"')) continue;
      return JSON.parse(line) as { status: number; prompt_tokens_est?: number };
    }
    return undefined;
  }, 10_000, `the access-log line of ${id}`);
}

const cases: Array<[string, string, Record<string, unknown>]> = [
  ['a 4.9 MB token-id prompt', '/v1/completions', { model: 'test-model', prompt: Array.from({ length: 800_000 }, (_, i) => (i * 7919) % 128_000), max_tokens: 1 }],
  ['a list of token-id lists', '/v1/completions', { model: 'test-model', prompt: Array.from({ length: 300 }, (_, j) => Array.from({ length: 1000 }, (_, i) => i + j)), max_tokens: 1 }],
  ['a 3 MB chat message after a short one', '/v1/chat/completions', { model: 'test-model', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'word '.repeat(600_000) }] }],
];

for (const [name, path, body] of cases) {
  t.test(`${name}: forwarded as sent, its whole length estimated`, async (t) => {
    const id = `long-${up.received.length}`;
    const raw = JSON.stringify(body);
    const res = await request(`${gw.url}${path}`, { method: 'POST', body: raw, headers: { 'content-type': 'application/json', 'x-request-id': id } });
    t.equal(res.statusCode, 200);
    t.equal(await res.body.text(), COMPLETION);
    t.equal(up.received.at(-1)?.body, raw, 'the model server got the body byte for byte');
    const line = await accessLine(id);
    t.equal(line.prompt_tokens_est, Math.ceil(renderPrompt(body).length / 4), 'the estimate covers the whole prompt');
  });
}
