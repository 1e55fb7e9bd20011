// The mock's embeddings, rerank/score, classify/pooling, tokenize/detokenize, Responses and speech-to-text answers (src/mock/apis.ts), as pure functions:
// vLLM's shapes, determinism, base64 as float32 little-endian, and the refusals.
import t from 'tap';
import { AUDIO_BYTES_PER_S, audioAnswer, base64Floats, classifyAnswer, CLASS_LABELS, detokenizeAnswer, EMBEDDING_DIM, embeddingsAnswer, embedVector, poolingAnswer, rerankAnswer, responsesAnswer, scoreAnswer, tokenizeAnswer, type ApiAnswer } from '../../src/mock/apis.js';
import type { ServedModel } from '../../src/mock/admission.js';

const served: ServedModel = { model: 'm', loras: ['lora-a'], seed: 1, maxModelLen: 64, kvCapacityTokens: 10_000 };

function ok(a: ApiAnswer): Record<string, any> {
  if (a.status !== 200) throw new Error(`refused: ${a.refusal.message}`);
  return JSON.parse(a.body) as Record<string, any>;
}

t.test('embeddings: unit vectors, deterministic, base64 = the same float32 values', async (t) => {
  const f = ok(embeddingsAnswer(JSON.stringify({ model: 'm', input: ['hello world', 'goodbye'] }), served, '1'));
  t.match(f, { object: 'list', model: 'm', usage: { completion_tokens: 0 } });
  t.equal(f.usage.prompt_tokens, f.usage.total_tokens);
  const [a, b] = f.data.map((d: { embedding: number[] }) => d.embedding);
  t.equal(a.length, EMBEDDING_DIM);
  t.ok(Math.abs(Math.hypot(...a) - 1) < 1e-6);
  t.notSame(a, b);
  t.same(ok(embeddingsAnswer(JSON.stringify({ model: 'm', input: ['hello world', 'goodbye'] }), served, '2')).data, f.data, 'same input, same vectors');
  const b64 = ok(embeddingsAnswer(JSON.stringify({ model: 'm', input: 'hello world', encoding_format: 'base64' }), served, '3'));
  const bytes = Buffer.from(b64.data[0].embedding as string, 'base64');
  t.equal(bytes.length, EMBEDDING_DIM * 4);
  const decoded = Array.from({ length: EMBEDDING_DIM }, (_, i) => bytes.readFloatLE(i * 4));
  t.same(decoded, a, 'base64 decodes to the float answer');
  t.equal(base64Floats(new Float32Array([1, -2])), Buffer.from(new Float32Array([1, -2]).buffer).toString('base64'));
  const short = ok(embeddingsAnswer(JSON.stringify({ model: 'lora-a', input: [[1, 2], [3]], dimensions: 8 }), served, '4'));
  t.same(short.data.map((d: { embedding: number[] }) => d.embedding.length), [8, 8], 'token ids, an adapter, fewer dimensions');
  t.ok(Math.abs(Math.hypot(...short.data[0].embedding) - 1) < 1e-6, 'still unit vectors');
  t.equal(embedVector([], 'm', 1, 4)[0], 1, 'no tokens: a fixed unit vector, never NaN');
});

t.test('embeddings refusals, in vLLM\'s words', async (t) => {
  const cases: Array<[unknown, number, string | null]> = [
    [{ model: 'other', input: 'x' }, 404, 'model'],
    [{ model: 'm' }, 400, 'input'],
    [{ model: 'm', input: 'x', dimensions: 4096 }, 400, 'dimensions'],
    [{ model: 'm', input: 'x'.repeat(1000) }, 400, 'input'],
  ];
  for (const [body, status, param] of cases) {
    const a = embeddingsAnswer(JSON.stringify(body), served, 'x');
    t.equal(a.status, status, JSON.stringify(body).slice(0, 60));
    if (a.status !== 200) t.equal(a.refusal.param, param);
  }
  t.equal(embeddingsAnswer('{"model":', served, 'x').status, 400, 'bad JSON');
});

t.test('rerank and score: vLLM\'s shapes, best first, top_n, the same rating either way, and the refusals', async (t) => {
  const documents = ['the cat sat on the mat', 'a dog in the fog', 'the cat sat on the mat again'];
  const r = ok(rerankAnswer(JSON.stringify({ model: 'm', query: 'the cat sat', documents }), served, '1'));
  t.same(Object.keys(r).sort(), ['id', 'model', 'results', 'usage']);
  t.equal(r.id, 'rerank-1');
  t.equal(r.results.length, 3);
  const scores = r.results.map((x: { relevance_score: number }) => x.relevance_score);
  t.same(scores, [...scores].sort((a, b) => b - a), 'best first');
  for (const x of r.results) {
    t.equal(x.document.text, documents[x.index], 'each result names its document');
    t.ok(x.relevance_score >= 0 && x.relevance_score <= 1);
  }
  t.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);
  const top = ok(rerankAnswer(JSON.stringify({ model: 'm', query: 'the cat sat', documents, top_n: 1 }), served, '2'));
  t.same(top.results, r.results.slice(0, 1), 'top_n keeps the best');
  const s = ok(scoreAnswer(JSON.stringify({ model: 'm', text_1: 'the cat sat', text_2: documents }), served, '3'));
  t.match(s, { id: 'score-3', object: 'list', model: 'm', usage: { prompt_tokens: r.usage.prompt_tokens } });
  t.same(s.data.map((d: { index: number }) => d.index), [0, 1, 2]);
  for (const x of r.results) t.equal(s.data[x.index].score, x.relevance_score, 'score rates a pair as rerank does');
  const pairs = ok(scoreAnswer(JSON.stringify({ model: 'm', text_1: ['the cat sat', 'a dog'], text_2: [documents[0], documents[1]] }), served, '4'));
  t.equal(pairs.data.length, 2, 'lists paired one to one');
  const cases: Array<[(text: string) => ApiAnswer, unknown, number, string]> = [
    [(b) => rerankAnswer(b, served, 'x'), { model: 'other', query: 'q', documents: ['a'] }, 404, 'model'],
    [(b) => rerankAnswer(b, served, 'x'), { model: 'm', documents: ['a'] }, 400, 'query'],
    [(b) => rerankAnswer(b, served, 'x'), { model: 'm', query: 'q', documents: [{ text: 'a' }] }, 400, 'documents'],
    [(b) => rerankAnswer(b, served, 'x'), { model: 'm', query: 'q', documents: ['x'.repeat(1000)] }, 400, 'null'],
    [(b) => scoreAnswer(b, served, 'x'), { model: 'm', text_1: 'a' }, 400, 'text_1'],
    [(b) => scoreAnswer(b, served, 'x'), { model: 'm', query: 'a', items: ['b'] }, 400, 'text_1'],
    [(b) => scoreAnswer(b, served, 'x'), { model: 'm', text_1: ['a', 'b'], text_2: ['c'] }, 400, 'text_1'],
  ];
  for (const [answer, body, status, param] of cases) {
    const a = answer(JSON.stringify(body));
    t.equal(a.status, status, JSON.stringify(body).slice(0, 60));
    if (a.status !== 200) t.equal(String(a.refusal.param), param);
  }
});

t.test('classify and pooling: vLLM\'s shapes, deterministic, messages or input, and the refusals', async (t) => {
  const c = ok(classifyAnswer(JSON.stringify({ model: 'm', input: ['great stuff', 'awful stuff'] }), served, '1'));
  t.match(c, { id: 'classify-1', object: 'list', model: 'm', usage: { completion_tokens: 0 } });
  t.equal(c.data.length, 2);
  for (const d of c.data) {
    t.equal(d.num_classes, 2);
    t.equal(d.probs.length, 2);
    t.ok(Math.abs(d.probs[0] + d.probs[1] - 1) < 1e-5, 'probabilities sum to 1');
    t.equal(d.label, CLASS_LABELS[d.probs[1] > 0.5 ? 1 : 0], 'the label is the likelier class');
  }
  t.same(ok(classifyAnswer(JSON.stringify({ model: 'm', input: ['great stuff', 'awful stuff'] }), served, '2')).data, c.data, 'same input, same answer');
  const chat = ok(classifyAnswer(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), served, '3'));
  t.equal(chat.data.length, 1, 'messages: one classification');
  const p = ok(poolingAnswer(JSON.stringify({ model: 'm', input: 'hello world' }), served, '4'));
  t.match(p, { id: 'pool-4', object: 'list', model: 'm' });
  t.equal(p.data[0].object, 'pooling');
  const e = ok(embeddingsAnswer(JSON.stringify({ model: 'm', input: 'hello world' }), served, '5'));
  t.same(p.data[0].data, e.data[0].embedding, 'an embedding model pools to its embedding');
  const b64 = ok(poolingAnswer(JSON.stringify({ model: 'm', input: 'hello world', encoding_format: 'base64' }), served, '6'));
  t.equal(b64.data[0].data, base64Floats(new Float32Array(e.data[0].embedding)));
  for (const answer of [classifyAnswer, poolingAnswer]) {
    t.equal(answer(JSON.stringify({ model: 'm' }), served, 'x').status, 400, 'no input');
    t.equal(answer(JSON.stringify({ model: 'm', input: ['a', 1] }), served, 'x').status, 400, 'a mixed list');
    t.equal(answer(JSON.stringify({ model: 'm', input: 'x'.repeat(1000) }), served, 'x').status, 400, 'over max_model_len');
    t.equal(answer(JSON.stringify({ model: 'other', input: 'a' }), served, 'x').status, 404, 'an unknown model');
  }
});

t.test('tokenize and detokenize', async (t) => {
  const tok = ok(tokenizeAnswer(JSON.stringify({ model: 'm', prompt: 'hello world!' }), served));
  t.same(Object.keys(tok).sort(), ['count', 'max_model_len', 'token_strs', 'tokens']);
  t.equal(tok.count, 3, '12 characters, 4 a token');
  t.equal(tok.max_model_len, 64);
  t.equal(tok.token_strs, null);
  const strs = ok(tokenizeAnswer(JSON.stringify({ model: 'm', prompt: 'hello world!', return_token_strs: true }), served));
  t.equal(strs.token_strs.length, 3);
  const chat = ok(tokenizeAnswer(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }), served));
  t.ok(chat.count > 1, 'messages rendered as for chat');
  const detok = ok(detokenizeAnswer(JSON.stringify({ model: 'm', tokens: tok.tokens }), served));
  t.equal(detok.prompt, strs.token_strs.join(''), 'a word per id, the same as token_strs');
  t.equal(detokenizeAnswer(JSON.stringify({ model: 'm', tokens: [128256] }), served).status, 400, 'an id past the vocabulary');
  t.equal(tokenizeAnswer(JSON.stringify({ model: 'm', prompt: 'a', messages: [{ role: 'user' }] }), served).status, 400);
});

t.test('responses: one message, max_output_tokens words, the stream ends with the whole response', async (t) => {
  const whole = ok(responsesAnswer(JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: 4 }), served, 'r1'));
  t.match(whole, { object: 'response', status: 'incomplete', usage: { output_tokens: 4 } });
  const text = whole.output[0].content[0].text as string;
  t.equal(text.split(' ').length - 1, 4, 'four words');
  const s = responsesAnswer(JSON.stringify({ model: 'm', input: [{ role: 'user', content: 'hi' }], max_output_tokens: 4, stream: true }), served, 'r2');
  if (s.status !== 200) throw new Error('refused');
  t.equal(s.contentType, 'text/event-stream');
  const events = s.body.trim().split('\n\n').map((e) => JSON.parse(e.split('\n')[1].slice('data: '.length)) as { type: string; sequence_number: number; delta?: string });
  t.same(events.map((e) => e.sequence_number), events.map((_, i) => i), 'numbered in order');
  t.equal(events[0].type, 'response.created');
  t.equal(events.at(-1)!.type, 'response.incomplete');
  t.equal(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), text, 'a string input and the same message as a list: the same answer');
  t.equal(responsesAnswer(JSON.stringify({ model: 'm', input: 'hi', previous_response_id: 'resp_1' }), served, 'r3').status, 404, 'no store: every previous_response_id is unknown');
  t.equal(responsesAnswer(JSON.stringify({ model: 'm', input: 'x'.repeat(400) }), served, 'r4').status, 400, 'past the context length');
});

t.test('speech to text: the length from the audio\'s size, the asked format, a stream of chunks, and the refusals', async (t) => {
  const audio = new Uint8Array(AUDIO_BYTES_PER_S * 4).map((_, i) => (i * 31) & 0xff);
  const req = (fields: Record<string, string>, file = audio) =>
    ({ fields: new Map<string, Array<string | { filename: string; size: number }>>([...Object.entries(fields).map(([k, v]) => [k, [v]] as [string, string[]]), ['file', [{ filename: 'a.wav', size: file.length }]]]), audio: file });
  const j = ok(audioAnswer('transcriptions', req({ model: 'm' }), served, '1'));
  t.same(j.usage, { type: 'duration', seconds: 4 });
  t.equal(j.text.trim().split(' ').length, 10, 'about 2.5 words a second');
  t.equal(ok(audioAnswer('transcriptions', req({}), served, '2')).text, j.text, 'no model: the served one; the same audio, the same words');
  t.not(ok(audioAnswer('translations', req({ model: 'm' }), served, '3')).text, j.text, 'a translation is worded otherwise');
  const text = audioAnswer('transcriptions', req({ response_format: 'text' }), served, '4');
  t.match(text, { status: 200, contentType: /^text\/plain/, body: j.text.trimStart() });
  t.match(audioAnswer('transcriptions', req({ response_format: 'vtt' }), served, '5'), { body: /^WEBVTT\n\n00:00:00\.000 --> 00:00:04\.000\n/ });
  const verbose = ok(audioAnswer('translations', req({ response_format: 'verbose_json', language: 'de' }), served, '6'));
  t.match(verbose, { duration: '4', language: 'de', segments: [{ id: 0, start: 0, end: 4 }] });
  const s = audioAnswer('transcriptions', req({ model: 'lora-a', stream: 'true', stream_include_usage: 'true' }), served, '7');
  if (s.status !== 200) throw new Error('refused');
  t.equal(s.contentType, 'text/event-stream');
  const events = s.body.split('\n\n').filter(Boolean);
  t.equal(events.at(-1), 'data: [DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { object: string; model: string; choices: Array<{ delta: { content: string }; finish_reason: string | null }>; usage?: { prompt_tokens: number; completion_tokens: number } });
  t.ok(chunks.every((c) => c.object === 'transcription.chunk' && c.model === 'lora-a'));
  const usage = chunks.at(-1)!.usage!;
  t.same(usage, { prompt_tokens: 200, completion_tokens: chunks.length - 1, total_tokens: 200 + chunks.length - 1 }, 'the usage chunk last: 50 encoder positions a second');
  t.equal(chunks.at(-2)!.choices[0].finish_reason, 'stop');
  const refusals: Array<[Record<string, string>, number, string]> = [
    [{ model: 'other' }, 404, 'model'],
    [{ response_format: 'mp3' }, 400, 'response_format'],
    [{ stream_include_usage: 'true' }, 400, 'stream_include_usage'],
    [{ stream: 'perhaps' }, 400, 'stream'],
  ];
  for (const [fields, status, param] of refusals) t.match(audioAnswer('transcriptions', req(fields), served, 'x'), { status, refusal: { param } }, JSON.stringify(fields));
  t.match(audioAnswer('transcriptions', { fields: new Map([['model', ['m']]]), audio }, served, 'x'), { status: 400, refusal: { param: 'file' } }, 'no file');
});
