// What the gateway computes from a body, against a plain reference, on generated bodies:
// - renderPromptHead (the part of the prompt the prefix index reads, and the whole length for the token
//   estimate) against renderPrompt (the whole text, as the mock server renders it): the same first
//   characters and the same length, whatever the body holds;
// - scanJson (the raw-byte pass before JSON.parse) against the parsed value: nesting over the limit
//   exactly when the value is nested deeper, and the byte span of the top-level "model" string.
import t from 'tap';
import fc from 'fast-check';
import { renderPrompt, renderPromptHead } from '../../src/openai/prompt.js';
import { jsonLength, scanJson, stringifyJson } from '../../src/openai/json.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261130);
const text = fc.string({ unit: fc.constantFrom('a', 'b', ' ', '\n', 'é', '中', '"', '\\', '\u2028', '😀'), maxLength: 40 });
const tokenId = fc.oneof(fc.integer({ min: 0, max: 200_000 }), fc.integer(), fc.double(), fc.constant(-0));
const part = fc.oneof(
  fc.record({ type: fc.constant('text'), text }),
  fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: text }) }),
  // the other media parts (OpenAI's and vLLM's), some with long data, some with odd values
  fc.record(
    { type: fc.constantFrom('input_image', 'input_audio', 'file', 'video_url', 'image'), image_url: fc.oneof(text, fc.string({ minLength: 200, maxLength: 600 })), input_audio: fc.record({ data: fc.string({ maxLength: 600 }), format: text }), file: fc.jsonValue({ maxDepth: 2 }) },
    { requiredKeys: ['type'] },
  ),
  fc.jsonValue({ maxDepth: 3 }),
);
const toolCalls = fc.oneof(fc.array(fc.record({ id: text, type: fc.constant('function'), function: fc.record({ name: text, arguments: text }) }), { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }));
const message = fc.record(
  { role: fc.oneof(fc.constantFrom('system', 'user', 'assistant', 'tool'), text, fc.integer()), content: fc.oneof(text, fc.array(part, { maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), fc.constant(null)), tool_calls: toolCalls },
  { requiredKeys: [] },
);
const tools = fc.oneof(fc.array(fc.record({ type: fc.constant('function'), function: fc.record({ name: text, parameters: fc.jsonValue({ maxDepth: 3 }) }) }), { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }));
const body = fc.oneof(
  fc.record({ model: fc.constant('m'), messages: fc.array(fc.oneof(message, fc.jsonValue({ maxDepth: 1 })), { maxLength: 6 }), tools }, { requiredKeys: ['model', 'messages'] }),
  fc.record({ model: fc.constant('m'), prompt: fc.oneof(text, fc.array(fc.oneof(text, tokenId, fc.array(tokenId, { maxLength: 30 }), fc.jsonValue({ maxDepth: 2 })), { maxLength: 60 })) }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
);

t.test('renderPromptHead: the first maxChars characters of renderPrompt and its whole length', async (t) => {
  try {
    fc.assert(
      fc.property(body, fc.integer({ min: 0, max: 300 }), (b, max) => {
        const full = renderPrompt(b as Record<string, unknown>);
        const head = renderPromptHead(b as Record<string, unknown>, max);
        return head.text === full.slice(0, max) && head.chars === full.length;
      }),
      { seed: SEED, numRuns: 1500 },
    );
    t.pass('1500 generated bodies agree');
  } catch (e) {
    t.fail(`FUZZ_SEED=${SEED}: ${(e as Error).message}`);
  }
});

t.test('jsonLength: the length of stringifyJson, numbers measured without serialising', async (t) => {
  try {
    fc.assert(fc.property(fc.oneof(fc.jsonValue(), tokenId, fc.constantFrom(NaN, Infinity, -Infinity, 1e21, 2 ** 31, -(2 ** 31))), (v) => jsonLength(v) === stringifyJson(v).length), { seed: SEED, numRuns: 2000 });
    t.pass('2000 generated values agree');
  } catch (e) {
    t.fail(`FUZZ_SEED=${SEED}: ${(e as Error).message}`);
  }
});

t.test('a long token-id prompt: the head is cut, the length counted past it', async (t) => {
  const ids = Array.from({ length: 200_000 }, (_, i) => (i * 7919) % 128_000);
  const b = { model: 'm', prompt: ids };
  const head = renderPromptHead(b, 64 * 2048);
  const full = renderPrompt(b);
  t.equal(head.text.length, 64 * 2048, 'the head holds max_blocks × block_chars characters');
  t.equal(head.text, full.slice(0, 64 * 2048));
  t.equal(head.chars, full.length, 'the length is the whole rendering\'s');
});

/** Nesting depth of a parsed value (an explicit stack: generated values may be deep). */
function depthOf(v: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[v, 0]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    max = Math.max(max, d + 1);
    for (const y of Array.isArray(x) ? x : Object.values(x)) stack.push([y, d + 1]);
  }
  return max;
}

t.test('scanJson: depth and the model span agree with the parsed body', async (t) => {
  try {
    fc.assert(
      fc.property(body, fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 1, max: 8 }), fc.constantFrom(undefined, 1, '\t'), (b, extra, max, indent) => {
        const value = { ...(b as Record<string, unknown>), extra };
        const bytes = Buffer.from(JSON.stringify(value, null, indent));
        const shape = scanJson(bytes, max);
        if (shape.tooDeep !== depthOf(JSON.parse(bytes.toString())) > max) return false;
        if (shape.tooDeep) return true;
        const model = (JSON.parse(bytes.toString()) as { model?: unknown }).model;
        if (typeof model !== 'string') return shape.modelStart === -1;
        return JSON.parse(bytes.subarray(shape.modelStart, shape.modelEnd).toString()) === model;
      }),
      { seed: SEED, numRuns: 1500 },
    );
    t.pass('1500 generated bodies agree');
  } catch (e) {
    t.fail(`FUZZ_SEED=${SEED}: ${(e as Error).message}`);
  }
});
