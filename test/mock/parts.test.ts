/**
 * The mock's pure parts without a socket: admission (vLLM's wording of the shared structure check and
 * the mock's own limits), the fault draws and the faults body, and the answer builders.
 */
import t from 'tap';
import { admit, type ServedModel } from '../../src/mock/admission.js';
import { Faults } from '../../src/mock/faults.js';
import { finalBody, newReply, ReplyWriter, type ClientResponse } from '../../src/mock/stream.js';

const served: ServedModel = { model: 'm', loras: ['ad'], seed: 0, maxModelLen: 100, kvCapacityTokens: 1000 };
const chat = (extra: Record<string, unknown> = {}) => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...extra });

function refusal(text: string, kind: 'chat' | 'completions' = 'chat') {
  const a = admit(text, kind, served);
  if (a.ok) throw new Error(`admitted: ${text}`);
  return a.refusal;
}

t.test('admission words each structural problem the vLLM way', async (t) => {
  const cases: Array<[string, string, 'chat' | 'completions', string, string | null]> = [
    ['bad JSON', '{"model": ', 'chat', 'JSON decode error: ', null],
    ['not an object', '[1]', 'chat', 'Input should be a valid dictionary or object to extract fields from', null],
    ['no messages', '{}', 'chat', 'messages: Field required (a non-empty list)', 'messages'],
    ['empty messages', '{"messages":[]}', 'chat', 'messages: Field required (a non-empty list)', 'messages'],
    ['message without a role', '{"messages":[{"content":"x"}]}', 'chat', 'messages: Input should be a list of objects with a string role', 'messages'],
    ['no prompt', '{"prompt":5}', 'completions', 'prompt: Field required (a string or a list)', 'prompt'],
    ['empty prompt list', '{"prompt":[]}', 'completions', 'prompt: Field required (a string or a list)', 'prompt'],
    ['stream not boolean', chat({ stream: 'yes' }), 'chat', 'stream: Input should be a valid boolean', 'stream'],
    ['max_tokens 1.5', chat({ max_tokens: 1.5 }), 'chat', 'max_tokens: Input should be a valid integer', 'max_tokens'],
    ['max_tokens string', chat({ max_tokens: '5' }), 'chat', 'max_tokens: Input should be a valid integer', 'max_tokens'],
    ['max_tokens 0', chat({ max_tokens: 0 }), 'chat', 'max_tokens must be at least 1, got 0.', 'max_tokens'],
    ['max_tokens -3', chat({ max_tokens: -3 }), 'chat', 'max_tokens must be at least 1, got -3.', 'max_tokens'],
    ['max_completion_tokens 0', chat({ max_completion_tokens: 0 }), 'chat', 'max_completion_tokens must be at least 1, got 0.', 'max_completion_tokens'],
    ['n = 2', chat({ n: 2 }), 'chat', 'n: the mock serves n = 1 only (one choice per request).', 'n'],
    ['n = 0', chat({ n: 0 }), 'chat', 'n: the mock serves n = 1 only (one choice per request).', 'n'],
    ['model not a string', chat({ model: 3 }), 'chat', 'model: Input should be a valid string', 'model'],
    ['empty prompt', '{"prompt":""}', 'completions', 'The prompt cannot be empty.', 'prompt'],
  ];
  for (const [name, text, kind, message, param] of cases) {
    const r = refusal(text, kind);
    t.equal(r.status, 400, `${name}: status`);
    if (name === 'bad JSON') t.match(r.message, message, name);
    else t.equal(r.message, message, name);
    t.equal(r.param, param, `${name}: param`);
  }
  t.same(refusal(chat({ model: 'nope' })), { status: 404, message: 'The model `nope` does not exist.', param: 'model' });
});

t.test('admission checks the context length and the KV cache', async (t) => {
  t.match(refusal(chat({ messages: [{ role: 'user', content: 'x'.repeat(500) }] })), {
    message: /maximum context length is 100 tokens\. However, your request has \d+ input tokens/,
    param: 'input_tokens',
  });
  t.match(refusal(chat({ max_tokens: 95 })), { message: /you requested \d+ tokens \(\d+ in the messages, 95 in the completion\)/ });
  const small = admit(chat(), 'chat', { ...served, kvCapacityTokens: 4 });
  t.match(small, { ok: false, refusal: { message: /does not fit in the KV cache \(4 tokens\)/ } });
});

t.test('admitted requests: model, adapter, answer length, stream options', async (t) => {
  const a = admit(chat({ model: 'ad', max_tokens: 7, stream: true, stream_options: { include_usage: true } }), 'chat', served);
  if (!a.ok) throw new Error(a.refusal.message);
  t.match(a.request, { model: 'ad', lora: 'ad', maxTokens: 7, finishReason: 'length', stream: true, includeUsage: true });
  t.ok(a.request.tokens.length > 0);
  const b = admit(chat({ max_completion_tokens: 3, max_tokens: 9 }), 'chat', served);
  t.match(b, { ok: true, request: { model: 'm', lora: undefined, maxTokens: 3, stream: false, includeUsage: false } }, 'max_completion_tokens wins');
  const natural = admit(chat(), 'chat', served);
  t.match(natural, { ok: true, request: { finishReason: 'stop' } });
  const again = admit(chat(), 'chat', served);
  t.same(again, natural, 'the same request gets the same answer length and key');
  const seeded = admit(chat({ seed: 5 }), 'chat', served);
  if (!seeded.ok || !natural.ok) throw new Error('not admitted');
  t.not(seeded.request.key, natural.request.key, "the request's seed changes its text");
});

t.test('faults: seeded draws, and a faults body applied field by field', async (t) => {
  const draws = (seed: number, port: number) => {
    const f = new Faults({ failRate: 0.5, failMode: 'mixed' }, seed, port);
    return Array.from({ length: 200 }, () => f.pick());
  };
  const a = draws(3, 8000);
  t.same(draws(3, 8000), a, 'same seed and port, same draws');
  t.notSame(draws(3, 8001), a, 'another port, other draws');
  for (const k of ['none', 'refuse', '500', 'cut']) t.ok(a.includes(k as never), `${k} drawn`);
  t.ok(new Array(100).fill(0).every(() => new Faults({}, 0, 1).pick() === 'none'), 'no fail rate: no faults');
  t.same(Array.from({ length: 5 }, ((f) => () => f.pick())(new Faults({ failRate: 1, failMode: 'cut' }, 0, 1))), Array(5).fill('cut'));

  const f = new Faults({}, 0, 1);
  t.same(f.json(), { metrics: 'ok', fail_rate: 0, fail_mode: 'mixed' });
  t.equal(f.apply({ metrics: 'hang', fail_rate: 0.2, fail_mode: 'cut' }), null);
  t.same(f.json(), { metrics: 'hang', fail_rate: 0.2, fail_mode: 'cut' });
  t.same(f.apply({ metrics: 'error', fail_rate: 2 }), { message: 'fail_rate must be a number in [0, 1]', param: 'fail_rate' });
  t.equal(f.metrics, 'error', 'the fields before the bad one stay applied');
  t.equal(f.failRate, 0.2);
  t.match(f.apply({ metrics: 'sideways' }), { param: 'metrics' });
  t.match(f.apply({ fail_mode: 'sometimes' }), { param: 'fail_mode' });
  f.stop();
});

/** A response that records what is written to it. */
function fakeResponse(drains = true) {
  const log: string[] = [];
  const res: ClientResponse & { log: string[] } = {
    log,
    writeStatus: (s) => (log.push(`status ${s}`), res),
    writeHeader: (k, v) => (log.push(`${k}: ${v}`), res),
    write: (s) => (log.push(s), drains),
    end: (s) => log.push(`end ${s ?? ''}`),
    close: () => log.push('close'),
    cork: (cb) => cb(),
    onWritable: () => undefined,
  };
  return res;
}

t.test('answers: SSE chunks, usage chunk, [DONE], JSON body, the cut fault', async (t) => {
  const a = admit(chat({ max_tokens: 2, stream: true, stream_options: { include_usage: true } }), 'chat', served);
  if (!a.ok) throw new Error('not admitted');
  const res = fakeResponse();
  const dropped: boolean[] = [];
  const w = new ReplyWriter(() => 'h:1', (r, abort) => (dropped.push(abort), w.remove(r)));
  const r = newReply(res, 'chatcmpl-1', true, a.request, 0, false);
  w.add(r);
  t.ok(res.log.includes('content-type: text/event-stream; charset=utf-8') && res.log.includes('x-mock-endpoint: h:1'));
  w.token(r, 0);
  w.token(r, 1);
  w.finished(r);
  w.flush();
  const out = res.log[res.log.length - 1];
  t.ok(out.startsWith('end data: {"id":"chatcmpl-1","object":"chat.completion.chunk"'), 'one write ends the stream');
  const events = out.slice(4).split('\n\n').filter(Boolean);
  t.equal(events.length, 5, 'role, 2 tokens, usage, [DONE]');
  t.equal(events[4], 'data: [DONE]');
  const chunks = events.slice(0, 4).map((e) => JSON.parse(e.slice('data: '.length)));
  t.same(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  t.equal(chunks[2].choices[0].finish_reason, 'length');
  t.same(chunks[3].choices, []);
  t.match(chunks[3].usage, { completion_tokens: 2, total_tokens: r.promptTokens + 2 });
  t.equal(w.sseEvents, 5);
  t.equal(w.get('chatcmpl-1'), undefined, 'a finished reply is no longer open');

  const b = admit('{"prompt":"hello","max_tokens":3}', 'completions', served);
  if (!b.ok) throw new Error('not admitted');
  const plain = newReply(fakeResponse(), 'cmpl-2', false, b.request, 0, false);
  for (let i = 0; i < 3; i++) w.token(plain, i);
  const body = JSON.parse(finalBody(plain));
  t.match(body, { id: 'cmpl-2', object: 'text_completion', choices: [{ finish_reason: 'length' }], usage: { completion_tokens: 3 } });
  t.equal(body.choices[0].text.split(' ').length - 1, 3, 'three words');

  const cutRes = fakeResponse();
  const cut = newReply(cutRes, 'chatcmpl-3', true, { ...a.request, maxTokens: 10 }, 0, true);
  w.add(cut);
  for (let i = 0; i <= 5; i++) w.token(cut, i);
  w.flush();
  t.equal(cutRes.log[cutRes.log.length - 1], 'close', 'closed midway');
  t.notMatch(cutRes.log.join(''), /\[DONE\]/);
  t.same(dropped, [false], 'cut, not aborted');
});
