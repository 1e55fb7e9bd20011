// Usage for tenant quotas: read from a JSON answer and from a stream; include_usage added to a request's
// bytes in place; the extra usage chunk taken out of what the client receives, however the bytes are cut.
import t from 'tap';
import { Agent, request } from 'undici';
import { AnswerUsage, hasUsageKey, readUsage, SseUsage, topLevelSpan, usageOf, withIncludeUsage } from '../../src/openai/usage.js';
import { startMockServers } from '../../src/mock/index.js';

// vLLM's streamed chat answer with include_usage, as it frames it (one data line per event)
const HEAD = 'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"m","choices":[';
const VLLM_STREAM =
  `${HEAD}{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n` +
  `${HEAD}{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\n\n` +
  `${HEAD}{"index":0,"delta":{"content":" \\"usage\\" is a word"},"logprobs":null,"finish_reason":null}]}\n\n` +
  `${HEAD}{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n` +
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"m","choices":[],"usage":{"prompt_tokens":17,"total_tokens":20,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":16}}}\n\n' +
  'data: [DONE]\n\n';
const USAGE_EVENT_START = VLLM_STREAM.indexOf('data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"m","choices":[],');
const WITHOUT_USAGE = VLLM_STREAM.slice(0, USAGE_EVENT_START) + 'data: [DONE]\n\n';

/** Feeds `text` in pieces of `size` bytes; returns what was handed on and the filter. */
function feed(text: string | Buffer, size: number, strip: boolean) {
  const f = new SseUsage(strip);
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(f.push(bytes.subarray(i, i + size)));
  out.push(f.end());
  return { out: Buffer.concat(out).toString(), usage: f.usage };
}

t.test('usage of a JSON answer', async (t) => {
  t.same(readUsage('{"id":"x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}'), { promptTokens: 12, completionTokens: 5 });
  t.equal(readUsage('{"id":"x","choices":[]}'), null, 'no usage');
  t.equal(readUsage('{"usage":'), null, 'not JSON');
  t.equal(readUsage('{"usage":{"prompt_tokens":-1,"completion_tokens":2}}'), null, 'a negative count is not believed');
  t.equal(readUsage('{"usage":{"prompt_tokens":1.5,"completion_tokens":2}}'), null, 'nor a fraction');
  t.equal(readUsage('{"usage":{"prompt_tokens":"12"}}'), null, 'nor a string');
  t.same(usageOf({ usage: { prompt_tokens: 3 } }), { promptTokens: 3, completionTokens: 0 }, 'embeddings have no completion');
  t.equal(usageOf(null), null);
  t.same(readUsage('{"text":"hi","usage":{"type":"duration","seconds":7}}'), { promptTokens: 0, completionTokens: 0, audioSeconds: 7 }, 'a transcription: seconds of audio');
  t.same(usageOf({ usage: { type: 'duration', seconds: 2.5 } }), { promptTokens: 0, completionTokens: 0, audioSeconds: 2.5 });
  for (const u of [{ type: 'duration', seconds: -1 }, { type: 'duration', seconds: '7' }, { type: 'duration' }, { type: 'tokens', seconds: 7 }]) t.equal(usageOf({ usage: u }), null, JSON.stringify(u));
});

t.test('usage of a JSON answer: the trailing usage object read alone gives what parsing the whole answer gives', async (t) => {
  const cases: Array<[string, string]> = [
    ['{"id":"x","usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}', 'usage last, a nested object inside it'],
    ['{"id":"x","usage" :\n { "prompt_tokens" : 7 , "completion_tokens" : 3 } \n}\n', 'whitespace everywhere'],
    ['{"usage":{"prompt_tokens":1,"completion_tokens":1},"id":"x","usage":{"prompt_tokens":9,"completion_tokens":4}}', 'a repeated key: the last one, as JSON.parse keeps'],
    ['{"usage":{"prompt_tokens":9,"completion_tokens":4},"id":"x"}', 'usage not last: the whole answer is parsed'],
    ['{"id":"x","meta":{"usage":{"prompt_tokens":5,"completion_tokens":5}}}', 'a nested usage is not the answer\'s'],
    ['{"usage":{"prompt_tokens":2,"completion_tokens":2},"text":"a\\"usage\\":{\\"prompt_tokens\\":99}"}', '"usage" inside a string'],
    ['{"usage":{"prompt_tokens":2,"completion_tokens":2},"k\\"usage":{"prompt_tokens":99,"completion_tokens":1}}', 'a key that ends in "usage'],
    ['{"id":"x","usage":{"prompt_tokens":7,"completion_tokens":3}', 'cut before the closing brace'],
    ['{"id":"x","usage":{"prompt_tokens":7,"completion_tokens":3}}}', 'one brace too many'],
    ['{"id":"x","usage":null}', 'usage null'],
  ];
  for (const [text, why] of cases) {
    let expected: unknown;
    try {
      expected = usageOf(JSON.parse(text));
    } catch {
      expected = null;
    }
    t.same(readUsage(text), expected, why);
    t.same(readUsage(Buffer.from(text)), expected, `${why} (bytes)`);
  }
});

t.test('a stream the client asked usage for passes unchanged, byte for byte, and its usage is read', async (t) => {
  for (const size of [1, 7, 64, 100_000]) {
    const { out, usage } = feed(VLLM_STREAM, size, false);
    t.equal(out, VLLM_STREAM, `pieces of ${size}`);
    t.same(usage, { promptTokens: 17, completionTokens: 3 });
  }
});

t.test('a stream the gateway asked usage for loses exactly the usage chunk, whatever the cuts', async (t) => {
  for (const size of [1, 2, 13, 64, 333, 100_000]) {
    const { out, usage } = feed(VLLM_STREAM, size, true);
    t.equal(out, WITHOUT_USAGE, `pieces of ${size}`);
    t.same(usage, { promptTokens: 17, completionTokens: 3 });
  }
  const crlf = VLLM_STREAM.replaceAll('\n', '\r\n');
  const { out, usage } = feed(crlf, 5, true);
  t.equal(out, WITHOUT_USAGE.replaceAll('\n', '\r\n'), 'CRLF framing too');
  t.same(usage, { promptTokens: 17, completionTokens: 3 });
});

t.test('what is not a usage-only chunk is never dropped', async (t) => {
  // a chunk with choices and a usage (vLLM's continuous_usage_stats) stays; an error event stays
  const both = `${HEAD}{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}\n\n`;
  const err = 'data: {"error":{"message":"x","type":"server_error","param":null,"code":"upstream_stream_broken"}}\n\n';
  const { out, usage } = feed(both + err, 3, true);
  t.equal(out, both + err);
  t.same(usage, { promptTokens: 4, completionTokens: 1 });
  const unfinished = `${HEAD}{"index":0,"delta":{"content":"a"`;
  t.equal(feed(unfinished, 4, true).out, unfinished, 'an unfinished last event is handed on at the end');
  const huge = 'x'.repeat(3 << 20);
  t.equal(feed(huge, 1 << 16, true).out.length, huge.length, 'bytes that never form an event are not held forever');
});

t.test('include_usage is added to the bytes in place, every other byte as sent', async (t) => {
  const plain = Buffer.from('{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"n":1e400}');
  const a = withIncludeUsage(plain, JSON.parse('{"model":"m","stream":true,"messages":[]}'));
  t.equal(a.mode, 'added');
  t.equal(a.bytes.toString(), '{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"n":1e400}');

  const spaced = Buffer.from('\ufeff  {\n "model" : "m", "stream": true,\n "stream_options" : {"include_usage": false, "continuous_usage_stats": true} , "x": [1, {"stream_options": 2}] }');
  const body = JSON.parse(spaced.toString().slice(1));
  const b = withIncludeUsage(spaced, body);
  t.equal(b.mode, 'added');
  t.equal(
    b.bytes.toString(),
    '\ufeff  {\n "model" : "m", "stream": true,\n "stream_options" : {"include_usage":true,"continuous_usage_stats":false} , "x": [1, {"stream_options": 2}] }',
    'the top-level object is replaced; a nested key of the same name is not',
  );
  t.same(JSON.parse(b.bytes.toString().slice(1)).stream_options, { include_usage: true, continuous_usage_stats: false });

  const nul = Buffer.from('{"model":"m","stream":true,"stream_options":null}');
  t.equal(withIncludeUsage(nul, JSON.parse(nul.toString())).bytes.toString(), '{"model":"m","stream":true,"stream_options":{"include_usage":true}}');

  const twice = Buffer.from('{"stream_options":{"a":1},"model":"m","stream":true,"stream_options":{}}');
  t.equal(
    withIncludeUsage(twice, JSON.parse(twice.toString())).bytes.toString(),
    '{"stream_options":{"a":1},"model":"m","stream":true,"stream_options":{"include_usage":true}}',
    'a repeated key: the last one, the one every JSON parser keeps',
  );

  const escaped = Buffer.from('{"model":"m","stream":true,"stream\\u005foptions":{}}');
  t.equal(
    withIncludeUsage(escaped, JSON.parse(escaped.toString())).bytes.toString(),
    '{"model":"m","stream":true,"stream\\u005foptions":{"include_usage":true}}',
    'an escaped key is the same key',
  );

  const asked = Buffer.from('{"model":"m","stream":true,"stream_options":{"include_usage":true}}');
  const c = withIncludeUsage(asked, JSON.parse(asked.toString()));
  t.equal(c.mode, 'client');
  t.equal(c.bytes, asked, 'the client asked: its bytes go as they are');

  const notStream = Buffer.from('{"model":"m"}');
  t.equal(withIncludeUsage(notStream, { model: 'm' }).mode, 'none');
  const bad = Buffer.from('{"model":"m","stream":true,"stream_options":"yes"}');
  const d = withIncludeUsage(bad, JSON.parse(bad.toString()));
  t.equal(d.mode, 'none', 'a stream_options the model server will refuse is left for it to refuse');
  t.equal(d.bytes, bad);
  t.equal(topLevelSpan(Buffer.from('[1]'), 'a'), null, 'not an object');
  const near = Buffer.from('{"stream_option":1,"stream_optionsx":2,"stream_opti\u00f6ns":3,"stream_opti\\u006fns":4}');
  t.same(topLevelSpan(near, 'stream_options')?.span, [near.length - 2, near.length - 1], 'only the key that decodes to it, not a shorter, longer or non-ASCII one of the same length');
  t.same(topLevelSpan(Buffer.from('{"a":1,"b":2}'), 'stream_options')?.span, null, 'absent');
});

t.test('against the mock: a stream with the added usage chunk, filtered, is the stream the client asked for', async (t) => {
  const s = await startMockServers({ port: 0, model: 'm', timeScale: 50 });
  const agent = new Agent({ keepAliveTimeout: 1000 });
  t.teardown(async () => {
    await agent.close();
    await s.close();
  });
  const post = async (body: Buffer) => {
    const r = await request(`http://${s.endpoints[0]}/v1/chat/completions`, {
      method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent,
    });
    t.equal(r.statusCode, 200);
    const chunks: Buffer[] = [];
    for await (const c of r.body) chunks.push(c as Buffer);
    return chunks;
  };
  const asSent = Buffer.from(JSON.stringify({ model: 'm', stream: true, max_tokens: 9, seed: 3, messages: [{ role: 'user', content: 'Tell me about quotas.' }] }));
  const plain = Buffer.concat(await post(asSent)).toString();
  const { bytes, mode } = withIncludeUsage(asSent, JSON.parse(asSent.toString()));
  t.equal(mode, 'added');
  const filter = new SseUsage(true);
  const seen: Buffer[] = [];
  for (const c of await post(bytes)) seen.push(filter.push(c));
  seen.push(filter.end());
  const filtered = Buffer.concat(seen).toString();
  const same = (s: string) => s.replace(/"id":"[^"]+"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');
  t.equal(same(filtered), same(plain), 'identical but for the id and time');
  t.notMatch(filtered, /"choices":\[\]/);
  t.same(filter.usage, { promptTokens: filter.usage?.promptTokens, completionTokens: 9 });
  t.ok((filter.usage?.promptTokens ?? 0) > 0, 'the prompt tokens are read');
  // and the client who asked sees its usage chunk and the same numbers
  const passing = new SseUsage(false);
  const own = Buffer.concat((await post(bytes)).map((c) => passing.push(c))).toString();
  t.match(own, /"choices":\[\],"usage":\{"prompt_tokens":\d+/);
  t.same(passing.usage, filter.usage);
});

t.test('AnswerUsage: one object for either kind of answer', async (t) => {
  const json = Buffer.from('{"id":"x","choices":[{"index":0,"text":"hi"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}');
  const a = new AnswerUsage('none', false);
  const out = Buffer.concat([a.data(json.subarray(0, 10)), a.data(json.subarray(10)), a.end()]);
  t.same(out, json, 'a JSON answer goes through as it is');
  t.same(a.usage, { promptTokens: 9, completionTokens: 2 });
  const big = new AnswerUsage('none', false);
  big.data(Buffer.alloc(2 << 20, 0x20));
  big.end();
  t.equal(big.usage, null, 'an answer past 1 MiB is not kept for reading');
  const s = new AnswerUsage('added', true);
  const bytes = Buffer.from(VLLM_STREAM);
  const streamed = Buffer.concat([s.data(bytes.subarray(0, 100)), s.data(bytes.subarray(100)), s.end()]);
  t.equal(streamed.toString(), WITHOUT_USAGE);
  t.same(s.usage, { promptTokens: 17, completionTokens: 3 });
  const c = new AnswerUsage('client', true);
  t.equal(Buffer.concat([c.data(bytes), c.end()]).toString(), VLLM_STREAM);
  t.same(c.usage, { promptTokens: 17, completionTokens: 3 });
});

t.test('hasUsageKey finds "usage" (quotes included) anywhere, and nothing else', async (t) => {
  const cases: Array<[string, boolean]> = [
    ['"usage"', true], ['{"usage":{"prompt_tokens":1}}', true], ['uuu "usage" uu', true], ['data: {"object":"chat.completion.chunk","usage":null}', true],
    ['', false], ['"usage', false], ['usage"', false], ['"usag"', false], ['"usaGe"', false], ['"usages"', false], ['data: {"object":"chat.completion.chunk"}', false],
  ];
  for (const [text, want] of cases) t.equal(hasUsageKey(Buffer.from(text)), want, JSON.stringify(text));
});
