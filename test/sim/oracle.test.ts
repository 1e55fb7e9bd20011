// The exact oracle: Engine.predictTtftMs runs a copy of the engine's state forward and must give exactly the
// TTFT the request then gets when nothing arrives after it; asking must change nothing; and the oracle
// policy built on it never sheds a request that some server could answer within the deadline.
import t from 'tap';
import { Engine, type EngineEvent, type EngineProfile } from '../../src/engine/index.js';
import { generateWorkload, runSimulation, oraclePolicy, type SimRequest } from '../../src/sim/index.js';
import { runLoop } from '../../src/sim/loop.js';
import { headlineOf } from '../../src/sim/slo.js';

// small and tight: few blocks (preemptions), few seats, a small token budget (chunked prefill), one LoRA slot
const TIGHT: Partial<EngineProfile> = { numGpuBlocks: 100, blockSize: 16, maxNumBatchedTokens: 256, maxNumSeqs: 4, maxLoras: 1, loras: ['a', 'b'], maxModelLen: 4096 };

interface Arrival {
  at: number;
  tokens: Uint32Array;
  maxTokens: number;
  lora?: string;
}

/** Seeded arrivals: prompts share one of three prefixes, some use an adapter. */
function arrivals(seed: number, n: number): Arrival[] {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const prefixes = [0, 1, 2].map((p) => Array.from({ length: 64 + p * 48 }, (_, i) => 1000 * (p + 1) + i));
  const out: Arrival[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    at += Math.floor(rnd() * rnd() * 1500); // bursts and lulls
    const pre = prefixes[Math.floor(rnd() * 3)];
    const own = Array.from({ length: 10 + Math.floor(rnd() * 400) }, (_, k) => 50_000 + i * 1000 + k);
    const r = rnd();
    out.push({ at, tokens: Uint32Array.from([...pre, ...own]), maxTokens: 1 + Math.floor(rnd() * 200), lora: r < 0.15 ? 'a' : r < 0.25 ? 'b' : undefined });
  }
  return out;
}

/** A minimal front (as sim/loop.ts orders it: a step that ends at an arrival's instant ends first). */
function drive(engine: Engine, list: Arrival[], predict: boolean) {
  const events: EngineEvent[] = [];
  const predicted = new Map<string, number>();
  let stepEnd = Infinity;
  const kick = (now: number) => {
    if (stepEnd !== Infinity) return;
    const d = engine.startStep(now);
    if (d !== null) stepEnd = now + d;
  };
  let i = 0;
  while (i < list.length || stepEnd !== Infinity) {
    if (stepEnd <= (i < list.length ? list[i].at : Infinity)) {
      const now = stepEnd;
      stepEnd = Infinity;
      events.push(...engine.finishStep(now));
      kick(now);
    } else {
      const a = list[i];
      if (predict) predicted.set(String(i), engine.predictTtftMs(a.tokens, a.lora, a.at));
      engine.add({ id: String(i), promptTokens: a.tokens, maxTokens: a.maxTokens, lora: a.lora }, a.at);
      kick(a.at);
      i++;
    }
  }
  return { events, predicted };
}

t.test('the prediction equals the realised TTFT whenever no later arrival comes before the first token', async (t) => {
  let compared = 0;
  let preemptions = 0;
  for (const seed of [1, 2, 3, 4]) {
    const list = arrivals(seed, 150);
    const engine = new Engine(TIGHT);
    const { events, predicted } = drive(engine, list, true);
    preemptions += engine.snapshot().preemptionsTotal;
    for (const e of events) {
      if (e.type !== 'first_token') continue;
      const i = Number(e.id);
      const interfered = i + 1 < list.length && list[i + 1].at < e.at;
      if (interfered) continue;
      compared++;
      if (predicted.get(e.id) !== e.at - list[i].at) t.fail(`seed ${seed}, request ${i}: predicted ${predicted.get(e.id)} ms, realised ${e.at - list[i].at} ms`);
    }
  }
  t.ok(compared >= 100, `${compared} requests compared exactly`);
  t.ok(preemptions > 0, `the states included preemptions (${preemptions})`);
});

t.test('asking changes nothing: the same events with and without predictions', async (t) => {
  for (const seed of [5, 6]) {
    const list = arrivals(seed, 120);
    const a = new Engine(TIGHT);
    const b = new Engine(TIGHT);
    const withPred = drive(a, list, true).events;
    const without = drive(b, list, false).events;
    t.same(withPred, without, `seed ${seed}: ${without.length} events identical`);
    t.same(a.snapshot(), b.snapshot(), `seed ${seed}: final state identical`);
  }
});

t.test('a request the engine cannot take is predicted as never served', async (t) => {
  const e = new Engine(TIGHT);
  t.equal(e.predictTtftMs(new Uint32Array(5000), undefined, 0), Infinity, 'beyond the KV capacity');
  t.equal(new Engine({ ...TIGHT, maxLoras: 0 }).predictTtftMs(new Uint32Array(10), 'a', 0), Infinity, 'LoRA on a server without slots');
  t.equal(e.predictTtftMs(Uint32Array.from({ length: 100 }, (_, i) => i), undefined, 7, 1), Infinity, 'slower than the limit: Infinity');
  t.ok(e.predictTtftMs(Uint32Array.from({ length: 100 }, (_, i) => i), undefined, 7) > 1, 'without a limit: the time');
});

t.test('in the simulator: the oracle\'s prediction for the last arrival is its realised TTFT', async (t) => {
  const reqs = generateWorkload('shared-prefix', { seed: 3, requests: 200 });
  const last = reqs.length - 1;
  let predicted = NaN;
  let realised = NaN;
  runLoop(
    reqs.map((r) => ({ ...r, arrivalMs: r.arrivalMs / 3 })),
    (engines) => {
      const inner = oraclePolicy(engines);
      return {
        ...inner,
        pick(ctx) {
          const out = inner.pick(ctx);
          if (ctx.index === last && out.kind === 'ok') predicted = engines[out.endpoint].predictTtftMs(ctx.tokens, ctx.req.lora, ctx.now);
          return out;
        },
      };
    },
    { endpoints: 4, profile: {}, scrapeIntervalMs: 100, record: (rec) => void (rec.index === last && (realised = rec.ttftMs)) },
  );
  t.ok(Number.isFinite(predicted) && predicted > 0, `predicted ${predicted} ms`);
  t.equal(predicted, realised, 'equal to the ms');
});

t.test('the oracle never sheds while a server could answer within the deadline', async (t) => {
  // burst into idle capacity: many simultaneous arrivals on idle servers with a saturation threshold so
  // low that every server is "saturated" at once; the servers can still start every one of them in time
  const burst: SimRequest[] = Array.from({ length: 24 }, (_, i) => ({ arrivalMs: 1000, inputTokens: 600, outputTokens: 8, hashIds: [7_000_000 + i * 2, 7_000_001 + i * 2] }));
  const res = runSimulation({ requests: burst, endpoints: 4, policies: ['greedy_estimate', 'oracle'], pool: { saturation: { queue_depth: 1, kv_cache: 0 } } });
  const [greedy, oracle] = res.runs;
  t.equal(oracle.rejected, 0, 'the oracle serves the whole burst');
  t.match(headlineOf(oracle.slo), { ttft_ms: 2000, attainment: 1 }, 'every request within the 2 s SLO (the headline one)');
  t.ok(greedy.rejected > 0, `greedy_estimate (thresholds only) sheds ${greedy.rejected} of them`);

  // a real overload: far more than the pool can start within 50 ms → the oracle sheds, and only those; the
  // deadline is the headline objective's, not the first listed (a bound of 10 minutes, which every request meets)
  const heavy: SimRequest[] = Array.from({ length: 200 }, (_, i) => ({ arrivalMs: i, inputTokens: 6000, outputTokens: 50, hashIds: Array.from({ length: 12 }, (_, k) => 8_000_000 + i * 20 + k) }));
  const slos = [{ ttftMs: 600_000, itlMs: 1000 }, { ttftMs: 50, itlMs: 1000, headline: true }];
  const tight = runSimulation({ requests: heavy, endpoints: 2, policies: ['oracle'], slos, pool: { saturation: { queue_depth: 1, kv_cache: 0 } } });
  t.ok(tight.runs[0].rejected > 0, `sheds under overload (${tight.runs[0].rejected} of 200)`);
  t.ok(tight.runs[0].completed > 0, 'and serves what fits');
  const loose = runSimulation({ requests: heavy, endpoints: 2, policies: ['oracle'], slos: slos.map((s) => ({ ...s, headline: !s.headline })), pool: { saturation: { queue_depth: 1, kv_cache: 0 } } });
  t.equal(loose.runs[0].rejected, 0, 'with the 10-minute bound as the headline, nothing is shed');
});
