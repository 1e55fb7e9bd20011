// The request structure that the gateway and the mock both rely on (src/openai/validate.ts).
import t from 'tap';
import { audioFormProblem, bodyProblem, formBoolean, problemMessage, type FormValue } from '../../src/openai/validate.js';

const msgs = [{ role: 'user', content: 'hi' }];

t.test('well-formed bodies have no problem', async (t) => {
  t.equal(bodyProblem('chat', { model: 'm', messages: msgs }), null);
  t.equal(bodyProblem('chat', { messages: msgs, stream: null, max_tokens: 0, n: 1, max_completion_tokens: null }), null);
  t.equal(bodyProblem('completions', { prompt: 'x' }), null);
  t.equal(bodyProblem('completions', { prompt: ['a', 'b'], stream: true }), null);
  t.equal(bodyProblem('completions', { prompt: '' }), null, 'an empty string is a prompt (the server decides)');
});

t.test('each problem, in the order the checks run', async (t) => {
  const cases: Array<[string, 'chat' | 'completions', Record<string, unknown>, unknown]> = [
    ['stream not boolean', 'chat', { messages: msgs, stream: 'yes' }, { param: 'stream', issue: 'not_boolean' }],
    ['stream is checked first', 'chat', { stream: 1 }, { param: 'stream', issue: 'not_boolean' }],
    ['messages missing', 'chat', {}, { param: 'messages', issue: 'missing' }],
    ['messages empty', 'chat', { messages: [] }, { param: 'messages', issue: 'missing' }],
    ['messages not a list', 'chat', { messages: 'hi' }, { param: 'messages', issue: 'missing' }],
    ['a message without role', 'chat', { messages: [{ content: 'x' }] }, { param: 'messages', issue: 'bad_message' }],
    ['a message that is null', 'chat', { messages: [null] }, { param: 'messages', issue: 'bad_message' }],
    ['a role that is a number', 'chat', { messages: [{ role: 1 }] }, { param: 'messages', issue: 'bad_message' }],
    ['chat ignores prompt', 'chat', { prompt: 'x' }, { param: 'messages', issue: 'missing' }],
    ['prompt missing', 'completions', {}, { param: 'prompt', issue: 'missing' }],
    ['prompt empty list', 'completions', { prompt: [] }, { param: 'prompt', issue: 'missing' }],
    ['prompt a number', 'completions', { prompt: 5 }, { param: 'prompt', issue: 'missing' }],
    ['max_tokens negative', 'chat', { messages: msgs, max_tokens: -1 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_tokens fractional', 'completions', { prompt: 'x', max_tokens: 1.5 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_tokens a string', 'chat', { messages: msgs, max_tokens: '5' }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_completion_tokens', 'chat', { messages: msgs, max_completion_tokens: -3 }, { param: 'max_completion_tokens', issue: 'not_integer', min: 0 }],
    ['n zero', 'chat', { messages: msgs, n: 0 }, { param: 'n', issue: 'not_integer', min: 1 }],
    ['max_tokens before n', 'chat', { messages: msgs, n: 0, max_tokens: -1 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
  ];
  for (const [name, kind, body, want] of cases) t.same(bodyProblem(kind, body), want, name);
});

t.test('the gateway words each problem the OpenAI way, naming the field', async (t) => {
  t.equal(problemMessage({ param: 'stream', issue: 'not_boolean' }), 'The "stream" field must be a boolean.');
  t.match(problemMessage({ param: 'messages', issue: 'missing' }), /"messages" field is required/);
  t.match(problemMessage({ param: 'messages', issue: 'bad_message' }), /string "role"/);
  t.match(problemMessage({ param: 'prompt', issue: 'missing' }), /"prompt" field is required/);
  t.equal(problemMessage({ param: 'n', issue: 'not_integer', min: 1 }), 'The "n" field must be a positive integer.');
  t.equal(problemMessage({ param: 'max_tokens', issue: 'not_integer', min: 0 }), 'The "max_tokens" field must be a non-negative integer.');
});

t.test('the other routed APIs: embeddings, responses, tokenize, detokenize', async (t) => {
  const ok: Array<[Parameters<typeof bodyProblem>[0], Record<string, unknown>]> = [
    ['embeddings', { input: 'hello' }],
    ['embeddings', { input: ['a', 'b'], encoding_format: 'base64' }],
    ['embeddings', { input: [1, 2, 3], encoding_format: 'float', dimensions: 8 }],
    ['embeddings', { input: [[1, 2], [3]] }],
    ['responses', { input: 'hi' }],
    ['responses', { input: [{ role: 'user', content: 'hi' }], max_output_tokens: 5, stream: true }],
    ['tokenize', { prompt: 'hello' }],
    ['tokenize', { prompt: '' }],
    ['tokenize', { messages: msgs, add_generation_prompt: true }],
    ['detokenize', { tokens: [0, 17, 4294967295] }],
  ];
  for (const [kind, body] of ok) t.equal(bodyProblem(kind, body), null, `${kind} ${JSON.stringify(body)}`);
  const bad: Array<[Parameters<typeof bodyProblem>[0], Record<string, unknown>, unknown]> = [
    ['embeddings', {}, { param: 'input', issue: 'missing' }],
    ['embeddings', { input: null }, { param: 'input', issue: 'missing' }],
    ['embeddings', { input: '' }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: ['a', ''] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: ['a', 1] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [1, -2] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [1, 2.5] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [[1], []] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [[1], [[2]]] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: [{ text: 'a' }] }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: 5 }, { param: 'input', issue: 'bad_input' }],
    ['embeddings', { input: new Array(2049).fill('x') }, { param: 'input', issue: 'too_many' }],
    ['embeddings', { input: 'a', encoding_format: 'int8' }, { param: 'encoding_format', issue: 'bad_encoding' }],
    ['embeddings', { input: 'a', dimensions: 0 }, { param: 'dimensions', issue: 'not_integer', min: 1 }],
    ['responses', {}, { param: 'input', issue: 'missing' }],
    ['responses', { input: [] }, { param: 'input', issue: 'missing' }],
    ['responses', { input: 'x', max_output_tokens: 0 }, { param: 'max_output_tokens', issue: 'not_integer', min: 1 }],
    ['tokenize', {}, { param: 'prompt', issue: 'missing' }],
    ['tokenize', { prompt: [1, 2] }, { param: 'prompt', issue: 'missing' }],
    ['tokenize', { prompt: 'a', messages: msgs }, { param: 'prompt', issue: 'prompt_and_messages' }],
    ['tokenize', { messages: [] }, { param: 'messages', issue: 'missing' }],
    ['tokenize', { messages: [{ content: 'x' }] }, { param: 'messages', issue: 'bad_message' }],
    ['detokenize', {}, { param: 'tokens', issue: 'bad_tokens' }],
    ['detokenize', { tokens: [] }, { param: 'tokens', issue: 'bad_tokens' }],
    ['detokenize', { tokens: ['1'] }, { param: 'tokens', issue: 'bad_tokens' }],
    ['detokenize', { tokens: [4294967296] }, { param: 'tokens', issue: 'bad_tokens' }],
  ];
  for (const [kind, body, want] of bad) t.same(bodyProblem(kind, body), want, `${kind} ${JSON.stringify(body).slice(0, 60)}`);
  for (const [, , want] of bad) t.type(problemMessage(want as never), 'string');
});

t.test('rerank and score: the fields vLLM (and SGLang) need, nothing a server would still accept', async (t) => {
  const ok: Array<[Parameters<typeof bodyProblem>[0], Record<string, unknown>]> = [
    ['rerank', { query: 'q', documents: ['a', 'b'], top_n: 1 }],
    ['rerank', { query: 'q', documents: [] }], // (the server decides what an empty list gets)
    ['rerank', { query: { content: [{ type: 'text', text: 'q' }] }, documents: { content: [] } }], // vLLM's multimodal form
    ['score', { text_1: 'a', text_2: ['b', 'c'] }],
    ['score', { text_1: ['a', 'b'], text_2: ['c', 'd'] }],
    ['score', { query: 'a', items: ['b'], label_token_ids: [1, 2] }], // SGLang's
  ];
  for (const [kind, body] of ok) t.equal(bodyProblem(kind, body), null, `${kind} ${JSON.stringify(body)}`);
  const bad: Array<[Parameters<typeof bodyProblem>[0], Record<string, unknown>, unknown]> = [
    ['rerank', { documents: ['a'] }, { param: 'query', issue: 'missing' }],
    ['rerank', { query: null, documents: ['a'] }, { param: 'query', issue: 'missing' }],
    ['rerank', { query: ['q'], documents: ['a'] }, { param: 'query', issue: 'missing' }],
    ['rerank', { query: 'q' }, { param: 'documents', issue: 'bad_documents' }],
    ['rerank', { query: 'q', documents: 'a' }, { param: 'documents', issue: 'bad_documents' }],
    ['score', {}, { param: 'text_1', issue: 'missing_pair' }],
    ['score', { text_1: 'a' }, { param: 'text_1', issue: 'missing_pair' }],
    ['score', { text_1: 'a', items: ['b'] }, { param: 'text_1', issue: 'missing_pair' }],
    ['score', { text_1: 'a', text_2: null }, { param: 'text_1', issue: 'missing_pair' }],
    ['rerank', { query: 'q', documents: ['a'], stream: 'no' }, { param: 'stream', issue: 'not_boolean' }],
  ];
  for (const [kind, body, want] of bad) t.same(bodyProblem(kind, body), want, `${kind} ${JSON.stringify(body)}`);
  t.match(problemMessage({ param: 'query', issue: 'missing' }), /"query" field is required/);
  t.match(problemMessage({ param: 'documents', issue: 'bad_documents' }), /"documents" field is required and must be an array/);
  t.match(problemMessage({ param: 'text_1', issue: 'missing_pair' }), /"text_1" and "text_2"/);
});

t.test('classify and pooling: an input, or else chat messages', async (t) => {
  for (const kind of ['classify', 'pooling'] as const) {
    t.equal(bodyProblem(kind, { input: 'a' }), null);
    t.equal(bodyProblem(kind, { input: ['a', 'b'] }), null);
    t.equal(bodyProblem(kind, { input: [1, 2] }), null);
    t.equal(bodyProblem(kind, { messages: msgs }), null);
    t.same(bodyProblem(kind, {}), { param: 'input', issue: 'missing' });
    t.same(bodyProblem(kind, { input: null }), { param: 'input', issue: 'missing' });
    t.same(bodyProblem(kind, { messages: [] }), { param: 'messages', issue: 'missing' });
    t.same(bodyProblem(kind, { messages: [{ content: 'x' }] }), { param: 'messages', issue: 'bad_message' });
  }
});

t.test('an audio form: one file part, at most one model and one stream, stream a boolean as pydantic reads one', async (t) => {
  const file: FormValue = { filename: 'a.wav', size: 10 };
  const form = (o: Record<string, FormValue[]>) => new Map(Object.entries(o));
  t.equal(audioFormProblem(form({ file: [file], model: ['m'] })), null);
  t.equal(audioFormProblem(form({ file: [file] })), null, 'no model: the front decides (the gateway needs one, vLLM takes its own)');
  t.equal(audioFormProblem(form({ file: [file], model: ['m'], stream: ['True'], language: ['en', 'de'] })), null, 'a field the gateway does not read may repeat');
  const bad: Array<[Record<string, FormValue[]>, unknown]> = [
    [{ model: ['m'] }, { param: 'file', issue: 'missing_file' }],
    [{ file: ['bytes as text'] }, { param: 'file', issue: 'missing_file' }],
    [{ file: [file, file] }, { param: 'file', issue: 'duplicate' }],
    [{ file: [file], model: ['a', 'b'] }, { param: 'model', issue: 'duplicate' }],
    [{ file: [file], stream: ['true', 'false'] }, { param: 'stream', issue: 'duplicate' }],
    [{ file: [file], stream: ['maybe'] }, { param: 'stream', issue: 'not_boolean' }],
    [{ file: [file], stream: [file] }, { param: 'stream', issue: 'not_boolean' }],
  ];
  for (const [o, want] of bad) t.same(audioFormProblem(form(o)), want, JSON.stringify(o));
  t.match(problemMessage({ param: 'file', issue: 'missing_file' }), /"file" field is required/);
  t.match(problemMessage({ param: 'model', issue: 'duplicate' }), /"model" field appears more than once/);
  for (const s of ['true', 'True', ' 1 ', 'yes', 'on', 't', 'Y']) t.equal(formBoolean(s), true, s);
  for (const s of ['false', 'FALSE', '0', 'no', 'off', 'f', 'n']) t.equal(formBoolean(s), false, s);
  for (const s of ['', 'maybe', '2', 'truthy']) t.equal(formBoolean(s), undefined, JSON.stringify(s));
});
