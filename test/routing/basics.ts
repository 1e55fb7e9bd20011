import t from 'tap';
import { seq } from '../helpers/routing.js';
import { Router, hashPrefixBlocks, poolOptions } from '../../src/routing/index.js';
import { configSchema } from '../../src/config/schema.js';
import { routerConfig } from '../../src/config/routing.js';
import { portable } from '../../src/routing/hash.js';

const sig = (o: Partial<{ waiting: number; running: number; kvUsage: number }> = {}) => ({
  waiting: 0, running: 0, kvUsage: 0, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});

t.test('hashPrefixBlocks: whole blocks, chained, salted', async (t) => {
  const a = hashPrefixBlocks('a'.repeat(200), 64, 'm1', 256);
  t.equal(a.length, 3);
  const b = hashPrefixBlocks('a'.repeat(150) + 'zz', 64, 'm1', 256);
  t.equal(b[0], a[0]);
  t.equal(b[1], a[1]);
  t.not(b[2], a[2], 'differs in block 3');
  const c = hashPrefixBlocks('a'.repeat(200), 64, 'm2', 256);
  t.not(c[0], a[0], 'salt separates');
  t.equal(hashPrefixBlocks('a'.repeat(200), 64, 'm1', 2).length, 2);
  const odd = hashPrefixBlocks('abc'.repeat(30), 9, 's', 100);
  t.equal(odd.length, 10);
  // changing one char in block 0 changes every later hash
  const d = hashPrefixBlocks('b' + 'a'.repeat(199), 64, 'm1', 256);
  for (let i = 0; i < 3; i++) t.not(d[i], a[i]);
});

t.test('hashPrefixBlocks: a block hashes alike whatever the rest of the text holds; every code path agrees', async (t) => {
  const rnd = seq(11);
  const pieces = ['a', 'b', 'q', ' ', '\n', 'é', 'ÿ', '\u201c', '中', '😀'];
  let mismatches = 0;
  const paths = { ascii: 0, wide: 0 };
  for (let n = 0; n < 400; n++) {
    const len = Math.floor(rnd() * 900);
    const asciiShare = n % 3 === 0 ? 1 : rnd(); // a third pure ASCII (the fast path)
    let s = '';
    while (s.length < len) s += rnd() < asciiShare ? 'abcdefghij'[Math.floor(rnd() * 10)] : pieces[Math.floor(rnd() * pieces.length)];
    for (const bc of [8, 12, 16, 64, 100]) {
      const fast = hashPrefixBlocks(s, bc, 'salt', 1000);
      const ref = new Uint32Array(fast.length);
      portable(s, bc, 'salt', fast.length, ref);
      if (fast.join() !== ref.join()) mismatches++;
      if (bc === 64 && fast.length > 0) paths[/^[\x00-\x7f]*$/.test(s) ? 'ascii' : 'wide']++;
    }
  }
  t.equal(mismatches, 0, 'buffer and charCodeAt paths agree on 2000 (string, block size) pairs');
  t.ok(paths.ascii > 20 && paths.wide > 20, `both buffer paths ran: ${JSON.stringify(paths)}`);
  // an ASCII prefix hashes the same in an ASCII-only string and in one with non-Latin-1 text after it
  const ascii = 'x'.repeat(640);
  const mixed = ascii + '中文 and “quotes” '.repeat(20);
  t.same([...hashPrefixBlocks(mixed, 64, 's', 99).slice(0, 10)], [...hashPrefixBlocks(ascii, 64, 's', 99)]);
  // Latin-1 (é) and wider (中) blocks: prefixes still shared, differing blocks differ
  const a = hashPrefixBlocks('é'.repeat(128) + '中'.repeat(64), 64, 's', 9);
  const b = hashPrefixBlocks('é'.repeat(128) + '文'.repeat(64), 64, 's', 9);
  t.equal(a[1], b[1]);
  t.not(a[2], b[2]);
});

t.test('resolveModel: pools, aliases, sticky', async (t) => {
  const cfg = configSchema.parse({
    auth: { mode: 'none', allow_unauthenticated: true },
    models: [
      { name: 'base', pool: 'p' },
      { name: 'lora', pool: 'p' },
      { name: 'chat', targets: [{ model: 'base', weight: 90 }, { model: 'lora', weight: 10 }] },
    ],
    pools: { p: { endpoints: ['127.0.0.1:1', '127.0.0.1:2'] } },
  });
  const r = new Router(routerConfig(cfg), { random: seq(3) });
  t.same(r.resolveModel('base'), { pool: 'p', model: 'base' });
  t.equal(r.resolveModel('nope'), null);
  t.same(r.models().sort(), ['base', 'chat', 'lora']);
  t.same(r.pools(), ['p']);
  t.same(r.endpoints('p'), ['127.0.0.1:1', '127.0.0.1:2']);
  const counts: Record<string, number> = { base: 0, lora: 0 };
  for (let i = 0; i < 2000; i++) counts[r.resolveModel('chat')!.model]++;
  t.ok(counts.lora > 120 && counts.lora < 300, `about 10% lora: ${counts.lora}`);
  const first = r.resolveModel('chat', 'session-42')!.model;
  for (let i = 0; i < 20; i++) t.equal(r.resolveModel('chat', 'session-42')!.model, first);
});

t.test('maxModelLen: what the servers report, the least over endpoints and an alias\'s targets, unknown until every one has said', async (t) => {
  const cfg = configSchema.parse({
    auth: { mode: 'none', allow_unauthenticated: true },
    models: [
      { name: 'a', pool: 'p' },
      { name: 'b', pool: 'q' },
      { name: 'ab', targets: [{ model: 'a', weight: 1 }, { model: 'b', weight: 1 }] },
    ],
    pools: { p: { endpoints: ['127.0.0.1:1', '127.0.0.1:2'] }, q: { endpoints: ['127.0.0.1:3'] } },
  });
  const r = new Router(routerConfig(cfg), { random: seq(3) });
  const sig = (maxModelLen?: number) => ({ waiting: 0, running: 0, kvUsage: 0, loraRunning: [], loraWaiting: [], maxLoras: 0, ...(maxModelLen !== undefined && { maxModelLen }) });
  t.equal(r.maxModelLen('a'), undefined, 'nothing scraped yet');
  r.updateSignals('127.0.0.1:1', sig(32768), 0);
  t.equal(r.maxModelLen('a'), 32768);
  r.updateSignals('127.0.0.1:2', sig(8192), 0);
  t.equal(r.maxModelLen('a'), 8192, 'the least of the pool\'s endpoints (a request may reach either)');
  r.updateSignals('127.0.0.1:2', sig(), 0);
  t.equal(r.maxModelLen('a'), 32768, 'an endpoint that no longer says is left out');
  t.equal(r.maxModelLen('ab'), undefined, 'an alias with a target whose length is unknown: none');
  r.updateSignals('127.0.0.1:3', sig(16384), 0);
  t.equal(r.maxModelLen('ab'), 16384, 'the least over the alias\'s targets');
  t.equal(r.maxModelLen('nope'), undefined);
});

t.test('baseline policies', async (t) => {
  const r = Router.fromPool('p', {}, ['a:1', 'b:1', 'c:1'], { random: seq(5) });
  const input = { model: 'm', promptText: 'hello', promptTokens: 2 };
  const got = [];
  for (let i = 0; i < 6; i++) {
    const res = r.pick('p', input, 0, { policy: 'round_robin' });
    t.equal(res.kind, 'ok');
    if (res.kind === 'ok') {
      got.push(res.endpoint);
      r.onEnd(res.ticket, 1, 'ok');
    }
  }
  t.same(got, ['a:1', 'b:1', 'c:1', 'a:1', 'b:1', 'c:1']);
  // least_request spreads by our own in-flight count
  const held = [];
  const seen = new Set<string>();
  for (let i = 0; i < 3; i++) {
    const res = r.pick('p', input, 0, { policy: 'least_request' });
    if (res.kind === 'ok') {
      seen.add(res.endpoint);
      held.push(res.ticket);
    }
  }
  t.equal(seen.size, 3);
  for (const h of held) {
    r.onFirstByte(h, 1);
    r.onEnd(h, 2, 'ok');
    r.onEnd(h, 3, 'ok'); // idempotent
  }
  const dbg = r.debugPools(5) as Record<string, { endpoints: Array<{ in_flight: number; decoding: number }> }>;
  for (const e of dbg.p.endpoints) {
    t.equal(e.in_flight, 0);
    t.equal(e.decoding, 0);
  }
  const rnd = r.pick('p', input, 0, { policy: 'random' });
  t.equal(rnd.kind, 'ok');
  t.same(r.pick('p', { ...input, exclude: new Set(['a:1', 'b:1', 'c:1']) }, 0).kind, 'unavailable');
  t.same(r.pick('nope', input, 0).kind, 'unavailable');
  t.ok(poolOptions({ policy: 'random' }).policy === 'random');
  void sig;
});
