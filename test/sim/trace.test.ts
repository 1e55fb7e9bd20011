// Trace loading, the three views of a block chain (engine tokens, router prefix blocks, live text), generators.
import t from 'tap';
import { tokenize } from '../../src/engine/index.js';
import { hashPrefixBlocks } from '../../src/routing/index.js';
import {
  GENERATORS,
  TRACE_BLOCK_CHARS,
  generateWorkload,
  parseTrace,
  toTraceJsonl,
  tracePrefixBlocks,
  traceRequestText,
  traceTokens,
} from '../../src/sim/index.js';

t.test('parseTrace reads Mooncake lines, sorts by arrival, names a bad line', async (t) => {
  const text = [
    '{"timestamp": 20, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}',
    '',
    '{"timestamp": 10, "input_length": 100, "output_length": 7, "hash_ids": [2]}',
  ].join('\n');
  const r = parseTrace(text);
  t.same(r.map((x) => x.arrivalMs), [10, 20]);
  t.same(r[1], { arrivalMs: 20, inputTokens: 600, outputTokens: 5, hashIds: [0, 1] });
  t.same(parseTrace(toTraceJsonl(r)), r, 'toTraceJsonl round-trips');
  t.equal(parseTrace(text, 1).length, 1, 'limit');
  t.throws(() => parseTrace('{"timestamp": 1}\nnot json'), /line 1/);
});

t.test('engine tokens: same ids → same tokens; a partial block is a prefix of the full one', async (t) => {
  const a = traceTokens([5, 6, 7], 1400);
  const b = traceTokens([5, 6, 8], 1100);
  const c = traceTokens([5, 6], 700);
  t.equal(a.length, 1400);
  const eq = (x: Uint32Array, y: Uint32Array) => x.length === y.length && x.every((v, i) => v === y[i]);
  t.ok(eq(a.subarray(0, 1024), b.subarray(0, 1024)), 'shared blocks');
  t.notOk(eq(a.subarray(1024, 1100), b.subarray(1024, 1100)), 'different block');
  t.ok(eq(c, a.subarray(0, 700)), 'partial block');
});

t.test('router prefix blocks: shared leading ids ↔ shared leading hashes, chained', async (t) => {
  const a = tracePrefixBlocks([1, 2, 3], 1500, 64, 256, 'm');
  const b = tracePrefixBlocks([1, 2, 9], 1500, 64, 256, 'm');
  const c = tracePrefixBlocks([9, 2, 3], 1500, 64, 256, 'm');
  const d = tracePrefixBlocks([1, 2, 3], 1500, 64, 256, 'other');
  const per = TRACE_BLOCK_CHARS / 64;
  t.equal(a.length, Math.floor((1500 * 4) / 64));
  t.ok(a.subarray(0, 2 * per).every((v, i) => v === b[i]), 'shared leading ids share leading hashes');
  t.not(a[2 * per], b[2 * per]);
  t.not(a[per], c[per], 'chained: block 2 differs once block 1 did');
  t.not(a[0], d[0], 'the model salts the chain');
  t.equal(tracePrefixBlocks([1, 2, 3], 1500, 64, 10, 'm').length, 10, 'max blocks');
});

t.test('traceRequestText: same id → same text, cut to input_length, agrees with the router and the engine', async (t) => {
  const a = traceRequestText([1, 2, 3], 1300, 7);
  const b = traceRequestText([1, 2, 4], 1200, 7);
  t.equal(a.length, 1300 * 4);
  t.equal(tokenize(a).length, 1300, 'input_length tokens for the engine');
  t.equal(a.slice(0, 2 * TRACE_BLOCK_CHARS), b.slice(0, 2 * TRACE_BLOCK_CHARS));
  t.not(a.slice(2 * TRACE_BLOCK_CHARS, 2 * TRACE_BLOCK_CHARS + 64), b.slice(2 * TRACE_BLOCK_CHARS, 2 * TRACE_BLOCK_CHARS + 64));
  t.not(traceRequestText([1], 100, 8), traceRequestText([1], 100, 7), 'seeded');
  // the live router sees the same sharing structure as the simulated one
  const ha = hashPrefixBlocks(a, 64, 'm', 256);
  const hb = hashPrefixBlocks(b, 64, 'm', 256);
  let shared = 0;
  while (shared < hb.length && ha[shared] === hb[shared]) shared++;
  t.equal(shared, (2 * TRACE_BLOCK_CHARS) / 64);
});

t.test('generators: seeded, sorted, consistent', async (t) => {
  for (const g of GENERATORS) {
    const a = generateWorkload(g, { seed: 3, requests: 200 });
    const b = generateWorkload(g, { seed: 3, requests: 200 });
    const c = generateWorkload(g, { seed: 4, requests: 200 });
    t.equal(a.length, 200, `${g}: count`);
    t.equal(JSON.stringify(a), JSON.stringify(b), `${g}: deterministic`);
    t.not(JSON.stringify(a), JSON.stringify(c), `${g}: seed matters`);
    t.ok(a.every((r, i) => i === 0 || r.arrivalMs >= a[i - 1].arrivalMs), `${g}: sorted`);
    t.ok(a.every((r) => r.hashIds.length === Math.ceil(r.inputTokens / 512) && r.outputTokens >= 1), `${g}: blocks match lengths`);
  }
  const sp = generateWorkload('shared-prefix', { seed: 1, requests: 300 });
  const firsts = new Set(sp.map((r) => r.hashIds[0]));
  t.ok(firsts.size <= 32, 'shared-prefix: few system prompts');
  const ns = generateWorkload('no-sharing', { seed: 1, requests: 300 });
  t.equal(new Set(ns.flatMap((r) => r.hashIds)).size, ns.reduce((s, r) => s + r.hashIds.length, 0), 'no-sharing: all ids unique');
  const lm = generateWorkload('lora-mix', { seed: 1, requests: 100 });
  t.ok(lm.every((r) => r.lora !== undefined && r.model === r.lora), 'lora-mix: adapters');
  t.throws(() => generateWorkload('nope'), /unknown generator/);
});
