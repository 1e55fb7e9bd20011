import t from 'tap';
import { Engine, tokenize, DEFAULT_PROFILE, type EngineEvent, type EngineProfile } from '../../src/engine/index.js';

/** Drive an engine in virtual time until idle (or a step limit); returns all events. */
function runUntilIdle(e: Engine, clock: { now: number }, maxSteps = 1_000_000): EngineEvent[] {
  const out: EngineEvent[] = [];
  for (let i = 0; i < maxSteps; i++) {
    const d = e.startStep(clock.now);
    if (d === null) break;
    clock.now += d;
    out.push(...e.finishStep(clock.now));
  }
  return out;
}

function step(e: Engine, clock: { now: number }): EngineEvent[] {
  const d = e.startStep(clock.now);
  if (d === null) return [];
  clock.now += d;
  return e.finishStep(clock.now);
}

function toks(n: number, seed = 1): Uint32Array {
  const a = new Uint32Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    a[i] = (x >>> 0) % 128256;
  }
  return a;
}

t.test('tokenizer: deterministic, about 4 chars per token, prefix-stable', async (t) => {
  const a = tokenize('The quick brown fox jumps over the lazy dog');
  const b = tokenize('The quick brown fox jumps over the lazy dog');
  t.same(Array.from(a), Array.from(b));
  t.equal(a.length, Math.ceil(43 / 4));
  const long = tokenize('The quick brown fox jumps over the lazy dog, again and again');
  t.same(Array.from(long.subarray(0, 10)), Array.from(a.subarray(0, 10)), 'same leading tokens');
  t.not(Array.from(tokenize('hello')).join(), Array.from(tokenize('hellp')).join());
  t.equal(tokenize('').length, 0);
});

t.test('a prefix hit computes only the uncached tokens: shorter TTFT, hits counted in tokens', async (t) => {
  const e = new Engine();
  const clock = { now: 0 };
  const shared = toks(8000, 7);
  const p1 = new Uint32Array([...shared, ...toks(50, 1)]);
  const p2 = new Uint32Array([...shared, ...toks(50, 2)]);
  e.add({ id: 'a', promptTokens: p1, maxTokens: 3 }, clock.now);
  const ev1 = runUntilIdle(e, clock);
  const ft1 = ev1.find((x) => x.type === 'first_token')!;
  t.equal(ft1.type === 'first_token' && ft1.cachedTokens, 0);
  const ttft1 = ft1.at;
  t.ok(ttft1 > 400, `cold TTFT ${ttft1} ms for 8k tokens at 16k tok/s`);

  t.equal(e.cachedPrefixTokens(p2), 8000, 'all shared full blocks cached');
  const start = clock.now;
  e.add({ id: 'b', promptTokens: p2, maxTokens: 3 }, clock.now);
  const ev2 = runUntilIdle(e, clock);
  const ft2 = ev2.find((x) => x.type === 'first_token')!;
  t.equal(ft2.type === 'first_token' && ft2.cachedTokens, 8000);
  t.ok(ft2.at - start < ttft1 / 10, `warm TTFT ${ft2.at - start} ms`);
  const s = e.snapshot();
  t.equal(s.prefixQueries, p1.length + p2.length);
  t.equal(s.prefixHits, 8000);
  t.equal(s.successTotal, 2);
  t.equal(s.generationTokensTotal, 6);
  t.equal(s.promptTokensTotal, p1.length + p2.length);
});

t.test('events: index 0 has both first_token and token; exactly maxTokens tokens; finished last', async (t) => {
  const e = new Engine();
  const clock = { now: 0 };
  e.add({ id: 'x', promptTokens: toks(100), maxTokens: 5 }, 0);
  const ev = runUntilIdle(e, clock).filter((x) => x.id === 'x');
  t.same(ev.map((x) => x.type), ['scheduled', 'first_token', 'token', 'token', 'token', 'token', 'token', 'finished']);
  t.same(ev.filter((x) => x.type === 'token').map((x) => (x as { index: number }).index), [0, 1, 2, 3, 4]);
  const fin = ev.at(-1)!;
  t.equal(fin.type === 'finished' && fin.outputTokens, 5);
});

t.test('a fully cached prompt still computes its last token', async (t) => {
  const e = new Engine();
  const clock = { now: 0 };
  const p = toks(64);
  e.add({ id: 'a', promptTokens: p, maxTokens: 1 }, 0);
  runUntilIdle(e, clock);
  t.equal(e.cachedPrefixTokens(p), 48, 'at most length-1 tokens, in full blocks');
  e.add({ id: 'b', promptTokens: p, maxTokens: 1 }, clock.now);
  const ev = runUntilIdle(e, clock);
  const ft = ev.find((x) => x.type === 'first_token');
  t.equal(ft && ft.type === 'first_token' && ft.cachedTokens, 48);
});

t.test('more requests than maxNumSeqs wait (FCFS)', async (t) => {
  const e = new Engine({ maxNumSeqs: 2 });
  const clock = { now: 0 };
  for (let i = 0; i < 5; i++) e.add({ id: `r${i}`, promptTokens: toks(100, i + 1), maxTokens: 20 }, 0);
  const ev = step(e, clock);
  t.same(ev.filter((x) => x.type === 'scheduled').map((x) => x.id), ['r0', 'r1']);
  t.equal(e.snapshot().running, 2);
  t.equal(e.snapshot().waiting, 3);
  const all = runUntilIdle(e, clock);
  const order = all.filter((x) => x.type === 'scheduled').map((x) => x.id);
  t.same(order, ['r2', 'r3', 'r4']);
  t.equal(e.snapshot().successTotal, 5);
});

t.test('chunked prefill: a long prompt spans steps of maxNumBatchedTokens', async (t) => {
  const e = new Engine({ maxNumBatchedTokens: 1000 });
  const clock = { now: 0 };
  e.add({ id: 'a', promptTokens: toks(3500), maxTokens: 1 }, 0);
  let steps = 0;
  let first = -1;
  while (first < 0) {
    const ev = step(e, clock);
    steps++;
    if (ev.some((x) => x.type === 'first_token')) first = steps;
  }
  t.equal(first, 4, '3500 tokens at 1000 per step');
  // a decode keeps going while another prompt is prefilled in chunks
  e.add({ id: 'long', promptTokens: toks(5000, 9), maxTokens: 2 }, clock.now);
  e.add({ id: 'short', promptTokens: toks(10, 3), maxTokens: 50 }, clock.now);
  const ev = runUntilIdle(e, clock);
  t.equal(ev.filter((x) => x.type === 'finished').length, 2);
});

t.test('step cost grows with prefill tokens and batch size', async (t) => {
  const e = new Engine();
  e.add({ id: 'a', promptTokens: toks(16000), maxTokens: 2 }, 0);
  const d = e.startStep(0)!;
  // 8192 tokens at 16k tok/s = 512 ms + base
  t.ok(d > 500 && d < 540, `prefill step ${d}`);
  e.finishStep(d);
  const small = new Engine();
  small.add({ id: 'a', promptTokens: toks(10), maxTokens: 10 }, 0);
  small.startStep(0);
  small.finishStep(10);
  const d1 = small.startStep(10)!;
  t.ok(d1 >= 10 && d1 <= 14, `batch-1 decode step ${d1} ms`);
  small.finishStep(10 + d1);
  const big = new Engine();
  for (let i = 0; i < 200; i++) big.add({ id: `r${i}`, promptTokens: toks(10, i + 1), maxTokens: 10 }, 0);
  big.finishStep(big.startStep(0)!);
  const d200 = big.startStep(1000)!;
  t.ok(d200 > 20 && d200 < 35, `batch-200 decode step ${d200} ms`);
});

t.test('KV usage rises under load; freed cached blocks are evicted LRU', async (t) => {
  const e = new Engine({ numGpuBlocks: 40, blockSize: 16 });
  const clock = { now: 0 };
  const a = toks(160, 1); // 10 blocks
  const b = toks(160, 2);
  const c = toks(160, 3);
  e.add({ id: 'a', promptTokens: a, maxTokens: 100 }, 0);
  step(e, clock);
  t.ok(e.snapshot().kvUsage > 0.2, `usage ${e.snapshot().kvUsage}`);
  runUntilIdle(e, clock);
  t.equal(e.snapshot().kvUsage, 0, 'finished requests free their blocks');
  e.add({ id: 'b', promptTokens: b, maxTokens: 1 }, clock.now);
  runUntilIdle(e, clock);
  e.add({ id: 'c', promptTokens: c, maxTokens: 1 }, clock.now);
  runUntilIdle(e, clock);
  t.ok(e.cachedPrefixTokens(a) > 0 && e.cachedPrefixTokens(b) > 0 && e.cachedPrefixTokens(c) > 0, 'all three cached');
  // a fourth distinct prompt needs 11 blocks: evicts the least recently freed blocks (a's tail, then a's prefix)
  const d = toks(400, 4); // 25 blocks
  e.add({ id: 'd', promptTokens: d, maxTokens: 1 }, clock.now);
  runUntilIdle(e, clock);
  t.equal(e.cachedPrefixTokens(a), 0, 'a (oldest) evicted');
  t.equal(e.cachedPrefixTokens(c), 159 - (159 % 16), 'c (newest) kept');
  t.ok(e.snapshot().evictedBlocks > 0);
});

t.test('a request waits when blocks run out; decode without a block preempts the newest', async (t) => {
  const e = new Engine({ numGpuBlocks: 20, blockSize: 16 });
  const clock = { now: 0 };
  e.add({ id: 'a', promptTokens: toks(150, 1), maxTokens: 60 }, 0); // 10 blocks -> 14 at the end
  e.add({ id: 'b', promptTokens: toks(150, 2), maxTokens: 60 }, 0);
  const ev = runUntilIdle(e, clock);
  t.ok(ev.some((x) => x.type === 'preempted' && x.id === 'b'), 'b (last running) preempted');
  t.equal(ev.filter((x) => x.type === 'finished').length, 2, 'both finish after recompute');
  t.ok(e.snapshot().preemptionsTotal >= 1);
  const tokensB = ev.filter((x) => x.type === 'token' && x.id === 'b').length;
  t.equal(tokensB, 60, 'no token emitted twice after recompute');
  // blocks: a third request too big to fit now waits
  const w = new Engine({ numGpuBlocks: 20, blockSize: 16 });
  w.add({ id: 'x', promptTokens: toks(250, 5), maxTokens: 30 }, 0);
  w.add({ id: 'y', promptTokens: toks(250, 6), maxTokens: 30 }, 0);
  const c2 = { now: 0 };
  step(w, c2);
  t.equal(w.snapshot().running, 1);
  t.equal(w.snapshot().waiting, 1);
  runUntilIdle(w, c2);
  t.equal(w.snapshot().successTotal, 2);
});

t.test('abort frees blocks and the seat', async (t) => {
  const e = new Engine({ maxNumSeqs: 1 });
  const clock = { now: 0 };
  e.add({ id: 'a', promptTokens: toks(1000), maxTokens: 1000 }, 0);
  e.add({ id: 'b', promptTokens: toks(100, 2), maxTokens: 2 }, 0);
  step(e, clock);
  t.equal(e.snapshot().running, 1);
  t.ok(e.snapshot().kvUsage > 0);
  // abort mid-step
  const d = e.startStep(clock.now)!;
  e.abort('a', clock.now + d / 2);
  clock.now += d;
  const ev = e.finishStep(clock.now);
  t.notOk(ev.some((x) => x.id === 'a' && x.type === 'token'), 'no token for an aborted request');
  t.equal(e.snapshot().running, 0);
  const rest = runUntilIdle(e, clock);
  t.ok(rest.some((x) => x.id === 'b' && x.type === 'finished'));
  t.equal(e.snapshot().kvUsage, 0);
  e.abort('nope', 0); // unknown id: no-op
});

t.test('LoRA: maxLoras slots, waiting for a slot, load time, no cross-adapter cache sharing', async (t) => {
  const e = new Engine({ loras: ['a', 'b'], maxLoras: 1, loraLoadMs: 50 });
  const clock = { now: 0 };
  const p = toks(320, 1);
  e.add({ id: 'ra', promptTokens: p, maxTokens: 20, lora: 'a' }, 0);
  e.add({ id: 'rb', promptTokens: p, maxTokens: 5, lora: 'b' }, 0);
  e.add({ id: 'rbase', promptTokens: toks(50, 3), maxTokens: 5 }, 0);
  const d = e.startStep(0)!;
  t.ok(d >= 50, 'first step pays the adapter load');
  clock.now = d;
  const ev = e.finishStep(d);
  t.same(ev.filter((x) => x.type === 'scheduled').map((x) => x.id), ['ra', 'rbase'], 'b waits for a slot; base model needs none');
  let s = e.snapshot();
  t.same(s.loraRunning, ['a']);
  t.same(s.loraWaiting, ['b']);
  t.equal(s.maxLoras, 1);
  runUntilIdle(e, clock);
  s = e.snapshot();
  t.same(s.loraResident, ['b'], 'a evicted (LRU) when b loaded');
  t.equal(e.cachedPrefixTokens(p, 'a'), 320 - 16, 'a prompt cached under a');
  t.equal(e.cachedPrefixTokens(p), 0, 'not shared with the base model');
  t.equal(s.successTotal, 3);
});

t.test('estimateTtftMs tracks the real TTFT', async (t) => {
  const e = new Engine();
  const clock = { now: 0 };
  const p = toks(6000, 11);
  const est = e.estimateTtftMs(p, undefined, 0);
  e.add({ id: 'a', promptTokens: p, maxTokens: 2 }, 0);
  const ev = runUntilIdle(e, clock);
  const real = ev.find((x) => x.type === 'first_token')!.at;
  t.ok(Math.abs(est - real) / real < 0.15, `idle: estimate ${est} vs ${real}`);
  // cached: much smaller
  const est2 = e.estimateTtftMs(p, undefined, clock.now);
  t.ok(est2 < est / 5, `cached estimate ${est2}`);
  // queued behind other work: larger, and close to reality
  const e2 = new Engine();
  const c2 = { now: 0 };
  for (let i = 0; i < 4; i++) e2.add({ id: `w${i}`, promptTokens: toks(5000, 20 + i), maxTokens: 50 }, 0);
  const q = toks(3000, 99);
  const est3 = e2.estimateTtftMs(q, undefined, 0);
  e2.add({ id: 'q', promptTokens: q, maxTokens: 2 }, 0);
  const ev3 = runUntilIdle(e2, c2);
  const real3 = ev3.find((x) => x.type === 'first_token' && x.id === 'q')!.at;
  t.ok(est3 > est, 'queue ahead counts');
  t.ok(Math.abs(est3 - real3) / real3 < 0.3, `queued: estimate ${est3} vs ${real3}`);
  // seats full: waits for completions
  const e3 = new Engine({ maxNumSeqs: 2 });
  const c3 = { now: 0 };
  e3.add({ id: 'x', promptTokens: toks(100, 1), maxTokens: 100 }, 0);
  e3.add({ id: 'y', promptTokens: toks(100, 2), maxTokens: 200 }, 0);
  step(e3, c3);
  const est4 = e3.estimateTtftMs(toks(100, 3), undefined, c3.now);
  e3.add({ id: 'z', promptTokens: toks(100, 3), maxTokens: 1 }, c3.now);
  const t0 = c3.now;
  const ev4 = runUntilIdle(e3, c3);
  const real4 = ev4.find((x) => x.type === 'first_token' && x.id === 'z')!.at - t0;
  t.ok(Math.abs(est4 - real4) / real4 < 0.3, `seats full: estimate ${est4} vs ${real4}`);
});

t.test('profile validation and defaults', async (t) => {
  t.throws(() => new Engine({ maxNumSeqs: 0 }));
  t.throws(() => new Engine({ prefillTokensPerS: 0 }));
  const e = new Engine({ maxModelLen: 100 });
  t.throws(() => e.add({ id: 'a', promptTokens: toks(100), maxTokens: 1 }, 0), RangeError);
  t.throws(() => e.add({ id: 'b', promptTokens: new Uint32Array(0), maxTokens: 1 }, 0), RangeError);
  e.add({ id: 'c', promptTokens: toks(90), maxTokens: 50 }, 0);
  t.throws(() => e.add({ id: 'c', promptTokens: toks(90), maxTokens: 50 }, 0), /duplicate/);
  const ev = runUntilIdle(e, { now: 0 });
  const fin = ev.find((x) => x.type === 'finished')!;
  t.equal(fin.type === 'finished' && fin.outputTokens, 10, 'capped at maxModelLen');
  const p: EngineProfile = DEFAULT_PROFILE;
  t.equal(p.blockSize, 16);
  t.equal(new Engine({ decodeMs: undefined }).profile.decodeMs, DEFAULT_PROFILE.decodeMs, 'undefined fields keep defaults');
});

// The time it takes is printed, not asserted: on a loaded CI machine (the image run shares its cores) a
// bound failed at 4087 ms. Speed figures belong in native-bench (`npm run bench -- policies` runs this engine).
t.test('speed: 600 long prompts with a shared prefix replay to the end, the prefix hit', async (t) => {
  const e = new Engine();
  const clock = { now: 0 };
  const shared = toks(4000, 5);
  const start = performance.now();
  let n = 0;
  for (let i = 0; i < 600; i++) {
    const p = new Uint32Array(11600);
    p.set(shared);
    p.set(toks(7600, 1000 + i), 4000);
    e.estimateTtftMs(p, undefined, clock.now);
    e.add({ id: `r${i}`, promptTokens: p, maxTokens: 50 }, clock.now);
    for (let k = 0; k < 3; k++) {
      const ev = step(e, clock);
      n += ev.length;
    }
  }
  runUntilIdle(e, clock);
  const ms = performance.now() - start;
  t.equal(e.snapshot().successTotal, 600);
  t.comment(`600 requests of 11.6k tokens in ${ms.toFixed(0)} ms`);
  t.ok(e.snapshot().prefixHits >= 599 * 4000 - 16 * 600, 'shared prefix hit');
});
