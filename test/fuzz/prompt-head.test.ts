// renderPromptHead (what the gateway renders of a prompt: the part the prefix index reads, and the whole
// length for the token estimate) against renderPrompt (the whole text, as the mock server renders it),
// on generated request bodies: the same first characters and the same length, whatever the body holds.
import t from 'tap';
import fc from 'fast-check';
import { renderPrompt, renderPromptHead } from '../../src/openai/prompt.js';
import { jsonLength, stringifyJson } from '../../src/openai/json.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261130);
const text = fc.string({ unit: fc.constantFrom('a', 'b', ' ', '\n', 'é', '中', '"', '\\', '\u2028', '😀'), maxLength: 40 });
const tokenId = fc.oneof(fc.integer({ min: 0, max: 200_000 }), fc.integer(), fc.double(), fc.constant(-0));
const part = fc.oneof(fc.record({ type: fc.constant('text'), text }), fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: text }) }), fc.jsonValue({ maxDepth: 3 }));
const message = fc.record(
  { role: fc.oneof(fc.constantFrom('system', 'user', 'assistant'), text, fc.integer()), content: fc.oneof(text, fc.array(part, { maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), fc.constant(null)) },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.record({ model: fc.constant('m'), messages: fc.array(fc.oneof(message, fc.jsonValue({ maxDepth: 1 })), { maxLength: 6 }) }),
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
