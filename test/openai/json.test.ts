// JSON without recursion (src/openai/json.ts): the nesting measure and the stack-free serialiser.
import t from 'tap';
import { scanJson, stringifyDeep, stringifyJson } from '../../src/openai/json.js';
import { renderPrompt } from '../../src/openai/prompt.js';

const bytes = (s: string) => Buffer.from(s);
const jsonNestedDeeperThan = (b: Buffer, max: number) => scanJson(b, max).tooDeep;

t.test('nesting depth of raw JSON bytes', async (t) => {
  t.equal(jsonNestedDeeperThan(bytes('{}'), 1), false);
  t.equal(jsonNestedDeeperThan(bytes('{"a":[]}'), 1), true);
  t.equal(jsonNestedDeeperThan(bytes('{"a":[]}'), 2), false);
  t.equal(jsonNestedDeeperThan(bytes('[[],[],[[]]]'), 2), true);
  t.equal(jsonNestedDeeperThan(bytes('[[],[],[]]'), 2), false, 'siblings do not add up');
  t.equal(jsonNestedDeeperThan(bytes('{"k":"[[[[[["}'), 1), false, 'brackets in a string');
  t.equal(jsonNestedDeeperThan(bytes('{"k":"\\\\"}'), 1), false, 'an escaped backslash ends before the quote');
  t.equal(jsonNestedDeeperThan(bytes('{"k":"\\"[["}'), 1), false, 'an escaped quote does not end the string');
  t.equal(jsonNestedDeeperThan(bytes('['.repeat(1e6)), 64), true, 'a million levels, no stack used');
});

t.test('duplicated top-level keys the gateway acts on', async (t) => {
  const dup = (s: string) => scanJson(bytes(s), 64).duplicate;
  t.equal(dup('{"model":"a","messages":[]}'), null);
  t.equal(dup('{"model":"a","model":"b"}'), 'model');
  t.equal(dup('{"model":"a", "mod\\u0065l" :"b"}'), 'model', 'an escaped spelling is the same key');
  t.equal(dup('{"stream":true,"x":1,"stream":false}'), 'stream');
  t.equal(dup('{"messages":[],"prompt":"p","messages":[]}'), 'messages');
  t.equal(dup('{"user":"a","user":"b"}'), null, 'keys the gateway does not act on are the server\'s business');
  t.equal(dup('{"x":{"model":"a","model":"b"}}'), null, 'nested keys are not top-level');
  t.equal(dup('{"x":["model","model"],"y":"model"}'), null, 'values are not keys');
  t.equal(dup('{"x":"\\"model\\":1","model":"m"}'), null, 'a key-looking string inside a value');
});

t.test('where the model string lies in the bytes', async (t) => {
  const span = (s: string) => {
    const r = scanJson(bytes(s), 64);
    return r.modelStart < 0 ? null : s.slice(r.modelStart, r.modelEnd);
  };
  t.equal(span('{"model":"a"}'), '"a"');
  t.equal(span('{ "messages": [{"model":"no"}], "model" :  "x\\"y" , "n":1}'), '"x\\"y"');
  t.equal(span('{"model":7}'), null, 'a number');
  t.equal(span('{"model":null}'), null);
  t.equal(span('{"model":["a"]}'), null, 'a list');
  t.equal(span('{"model":{"a":"b"}}'), null, 'an object');
  t.equal(span('{"other":"a"}'), null);
});

t.test('the explicit-stack serialiser gives JSON.stringify\'s text for parsed values', async (t) => {
  const samples = [
    'null', 'true', '0', '-0', '1e21', '1.5e-7', '"\\u2028 \\"q\\" é 😀 \\u0000"', '[]', '{}', '[1,[2,[3,{}]],"x"]',
    '{"b":1,"a":[{"c":null,"d":[true,false]}],"":"", "1": 2, "0": 1}', '{"__proto__":1,"x":{"y":{"z":[[]]}}}',
  ];
  for (const s of samples) {
    const v = JSON.parse(s);
    t.equal(stringifyDeep(v), JSON.stringify(v), s);
    t.equal(stringifyJson(v), JSON.stringify(v), s);
  }
  // random nested values
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const gen = (d: number): unknown => {
    const r = rnd();
    if (d > 5 || r < 0.3) return [null, true, 1.25, -3, 'a"b\\c', ''][Math.floor(rnd() * 6)];
    if (r < 0.65) return Array.from({ length: Math.floor(rnd() * 4) }, () => gen(d + 1));
    const o: Record<string, unknown> = {};
    for (let i = 0; i < Math.floor(rnd() * 4); i++) o[`k${Math.floor(rnd() * 10)}`] = gen(d + 1);
    return o;
  };
  for (let i = 0; i < 300; i++) {
    const v = gen(0);
    if (stringifyDeep(v) !== JSON.stringify(v)) t.fail(`differs for ${JSON.stringify(v)}`);
  }
  t.pass('300 random values agree');
});

t.test('a content part nested 100,000 levels deep renders (JSON.stringify would overflow the stack)', async (t) => {
  const depth = 100_000;
  const part = JSON.parse('['.repeat(depth) + ']'.repeat(depth));
  t.throws(() => JSON.stringify(part), RangeError, 'the recursive serialiser overflows');
  const text = renderPrompt({ messages: [{ role: 'user', content: [part] }] });
  t.equal(text.length, '<|user|>\n'.length + 2 * depth + '\n<|assistant|>\n'.length);
  t.equal(renderPrompt({ prompt: [part] }).length, 2 * depth);
});
