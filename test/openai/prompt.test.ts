// What a request weighs on the pick (src/openai/prompt.ts): a rerank or score request's two sides' texts, the
// side paired with each item of the other counted once per item (as a cross-encoder reads it); a media part as one.
import t from 'tap';
import { constants } from 'node:buffer';
import { MEDIA_PART_TOKENS, mediaStandIn, pairExtraChars, promptBodyOf, renderPromptHead } from '../../src/openai/prompt.js';
import { CHARS_PER_TOKEN, tokensOfChars } from '../../src/openai/tokens.js';

const chars = (kind: 'rerank' | 'score', body: Record<string, unknown>) =>
  renderPromptHead(promptBodyOf(kind, body), 1 << 20).chars + pairExtraChars(kind, body);

t.test('rerank: the query read once per document', async (t) => {
  const query = 'q'.repeat(100);
  const documents = ['a'.repeat(10), 'b'.repeat(20), 'c'.repeat(30)];
  // rendered: query, then each document, newline-joined; plus the query twice more
  t.equal(chars('rerank', { query, documents }), 100 + 3 + 60 + 2 * 100);
  t.equal(chars('rerank', { query, documents: [documents[0]] }), 100 + 1 + 10, 'one document: the query once');
  t.equal(chars('rerank', { query, documents: [] }), 100, 'no documents: the query alone');
  t.equal(pairExtraChars('rerank', { query: { text: 'xy' }, documents: ['a', 'b'] }), JSON.stringify({ text: 'xy' }).length, 'an object query by its JSON length');
});

t.test('score: one to each, one to one, and SGLang\'s query and items', async (t) => {
  t.equal(chars('score', { text_1: 'x'.repeat(50), text_2: ['y', 'z'] }), 50 + 1 + 1 + 1 + 1 + 50, 'text_1 read twice');
  t.equal(pairExtraChars('score', { text_1: ['a', 'b'], text_2: ['c', 'd'] }), 0, 'lists paired one to one: each read once');
  t.equal(pairExtraChars('score', { text_1: ['a', 'b', 'c'], text_2: 'dd' }), 4, 'a list against one text: the text read per item');
  t.equal(pairExtraChars('score', { query: 'qqq', items: ['a', 'b', 'c', 'd'] }), 9, 'SGLang: query and items');
  t.equal(pairExtraChars('chat', { messages: [] }), 0, 'other APIs: nothing added');
  t.equal(pairExtraChars('embeddings', { input: ['a', 'b'] }), 0);
});

t.test('a huge request is measured, never built (no string of n × query)', async (t) => {
  const query = 'q'.repeat(100_000);
  const documents = new Array<string>(10_000).fill('d');
  const n = chars('rerank', { query, documents });
  t.equal(n, 100_000 + 2 * 10_000 + 9_999 * 100_000);
  t.ok(n > constants.MAX_STRING_LENGTH, 'longer than any string V8 can hold (so it was counted, not built)');
});

t.test('a media part renders as a stand-in of MEDIA_PART_TOKENS tokens, keyed by what it holds', async (t) => {
  const big = 'A'.repeat(500_000) + 'B'.repeat(500_000);
  const other = 'A'.repeat(500_000) + 'C'.repeat(500_000);
  const msg = (part: unknown) => ({ messages: [{ role: 'user', content: [part, { type: 'text', text: 'what is this?' }] }] });
  const image = (url: string) => ({ type: 'image_url', image_url: { url } });
  const a = renderPromptHead(msg(image(big)), 1 << 20);
  t.equal(a.chars, renderPromptHead(msg(image('x')), 1 << 20).chars, 'a 1 MB image weighs as a small one');
  t.equal(tokensOfChars(a.chars) - tokensOfChars(renderPromptHead({ messages: [{ role: 'user', content: 'what is this?' }] }, 1 << 20).chars), MEDIA_PART_TOKENS, 'its tokens');
  t.equal(a.text, renderPromptHead(msg(image(big)), 1 << 20).text, 'the same image, the same text');
  t.equal(a.media, 1, 'counted as one media part');
  t.equal(renderPromptHead({ messages: [{ role: 'user', content: [image('a'), image('b'), { type: 'text', text: 'x' }] }] }, 10).media, 2, 'past the cut too');
  t.not(a.text, renderPromptHead(msg(image(other)), 1 << 20).text, 'another image of the same length differs');
  t.not(a.text, renderPromptHead(msg(image('https://example.com/cat.png')), 1 << 20).text);
  for (const part of [
    { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'auto' },
    { type: 'input_audio', input_audio: { data: 'UklGR'.repeat(1000), format: 'wav' } },
    { type: 'file', file: { file_data: 'JVBERi0'.repeat(1000), filename: 'a.pdf' } },
    { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } },
  ]) {
    const s = mediaStandIn(part)!;
    t.equal(s.length, MEDIA_PART_TOKENS * CHARS_PER_TOKEN, part.type);
    t.ok(s.startsWith(`<|${part.type}|`), part.type);
  }
  t.equal(mediaStandIn({ type: 'text', text: 'x' }), undefined);
  t.equal(mediaStandIn({ type: 'tool_result', content: 'x' }), undefined, 'an unknown part keeps its JSON');
  const responses = renderPromptHead(promptBodyOf('responses', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: big }, { type: 'input_text', text: 'hi' }] }] }), 1 << 20);
  t.ok(responses.chars < 5000, `a Responses API input_image too (${responses.chars} characters)`);
});

t.test("an agent's tools come first, and an assistant's tool calls follow its content", async (t) => {
  const tools = [{ type: 'function', function: { name: 'read_file', parameters: { type: 'object' } } }];
  const calls = [{ id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } }];
  const messages = [
    { role: 'user', content: 'read a.txt' },
    { role: 'assistant', content: null, tool_calls: calls },
    { role: 'tool', tool_call_id: 'c1', content: 'hello' },
  ];
  const full = renderPromptHead({ messages, tools }, 1 << 20).text;
  t.ok(full.startsWith(`<|tools|>\n${JSON.stringify(tools)}\n<|user|>\nread a.txt\n`), 'the tools first, as a template puts them in the system prompt');
  t.ok(full.includes(`<|assistant|>\n${JSON.stringify(calls)}\n<|tool|>\nhello\n`), 'the call after its (empty) content');
  const other = renderPromptHead({ messages, tools: [{ type: 'function', function: { name: 'write_file' } }] }, 1 << 20).text;
  t.not(other.slice(0, 64), full.slice(0, 64), 'other tools: another prefix from the first block');
  t.equal(renderPromptHead({ messages, tools: [] }, 1 << 20).text.slice(0, 9), '<|user|>\n', 'no tools: nothing');
  const responses = renderPromptHead(promptBodyOf('responses', { input: 'hi', tools: [{ type: 'function', name: 'f' }] }), 1 << 20).text;
  t.ok(responses.startsWith('<|tools|>\n[{"type":"function","name":"f"}]\n<|user|>\nhi\n'), "a Responses request's tools too");
});
