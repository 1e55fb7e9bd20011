// What a rerank or score request weighs on the pick (src/openai/prompt.ts): both sides' texts, and the
// side paired with each item of the other counted once per item, as a cross-encoder reads it.
import t from 'tap';
import { constants } from 'node:buffer';
import { pairExtraChars, promptBodyOf, renderPromptHead } from '../../src/openai/prompt.js';

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
