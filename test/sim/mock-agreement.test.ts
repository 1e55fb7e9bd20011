// The simulator and the HTTP mock run the same engine: the same requests, sent to the same servers in the
// same order, get the same cached prefixes and (within timer jitter) the same TTFT.
import t from 'tap';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { startMockServers } from '../../src/mock/index.js';
import { runLoop, traceRequestText, type RequestRecord, type SimRequest } from '../../src/sim/index.js';

const TIME_SCALE = 1; // real time: timer lateness is not magnified
const ENDPOINTS = 2;
// Stated tolerance: |live − simulated| TTFT ≤ 30 ms + 10% (virtual ms) + the measured jitter per request,
// and the mean difference ≤ 15 ms + the measured jitter: the live side adds HTTP parsing, timer lateness and
// event-loop jitter (× TIME_SCALE). The mock runs in this process, so its step timers are as late as this
// event loop is: the jitter is JITTER_STEPS × the loop delay's p99 measured over the live run (a first
// token waits for a few timer-driven engine steps), 0 on an idle machine. A mock that disagreed with the
// engine model (prefill of 90–250 ms missing or doubled, a cache miss) is outside it on a quiet machine.
const ABS_MS = 30;
const REL = 0.1;
const MEAN_MS = 15;
const JITTER_STEPS = 3;

function scenario(): SimRequest[] {
  const groups = [[1, 2, 3, 4, 5, 6], [11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]];
  const out: SimRequest[] = [];
  for (let i = 0; i < 14; i++) {
    const g = groups[i % 3];
    const inputTokens = 1500 + ((i * 977) % 2500); // 1.5k–4k tokens: ~90–250 ms of prefill
    const hashIds = [...g.slice(0, Math.ceil(inputTokens / 512) - 1), 1000 + i];
    const prompt = traceRequestText(hashIds, inputTokens, 42);
    out.push({ arrivalMs: i * 120 + (i % 4 === 0 ? 0 : 30), inputTokens, outputTokens: 12 + (i % 5) * 6, hashIds, prompt });
  }
  return out;
}

t.test('simulator and HTTP mock agree on a small scenario', async (t) => {
  const reqs = scenario();
  const sim: RequestRecord[] = [];
  runLoop(
    reqs,
    () => ({ name: 'fixed', pick: (ctx) => ({ kind: 'ok', endpoint: ctx.index % ENDPOINTS }) }),
    { endpoints: ENDPOINTS, profile: {}, scrapeIntervalMs: 100, record: (r) => sim.push(r) },
  );
  sim.sort((a, b) => a.index - b.index);
  t.equal(sim.length, reqs.length);

  // The live side runs in real time: a busy machine (other test files, CI neighbours) makes its timers
  // late, which is not a disagreement. So: up to 3 attempts, fresh servers each time; cached tokens must
  // match on every attempt, timings on the best one.
  type Live = { status: number; ttftMs: number; cached?: number; out?: number; prompt?: number };
  let best: { live: Live[]; meanDiff: number; jitterMs: number } | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    const { live, loopDelayP99Ms } = await liveRun(reqs);
    const jitterMs = JITTER_STEPS * loopDelayP99Ms;
    let sum = 0;
    let within = true;
    for (let i = 0; i < reqs.length; i++) {
      t.equal(live[i].cached, sim[i].cachedTokens, `attempt ${attempt} #${i} cached tokens: live ${live[i].cached}, sim ${sim[i].cachedTokens}`);
      const d = Math.abs(live[i].ttftMs - sim[i].ttftMs);
      sum += d;
      if (d > ABS_MS + REL * sim[i].ttftMs + jitterMs) within = false;
    }
    const meanDiff = sum / reqs.length;
    if (!best || meanDiff - jitterMs < best.meanDiff - best.jitterMs) best = { live, meanDiff, jitterMs };
    if (within && meanDiff <= MEAN_MS + jitterMs) break;
    t.comment(`attempt ${attempt}: mean |diff| ${meanDiff.toFixed(1)} ms, jitter ${jitterMs.toFixed(1)} ms, retrying`);
  }
  const live = best!.live;
  const jitterMs = best!.jitterMs;
  t.comment(`event-loop jitter allowed: ${jitterMs.toFixed(1)} ms`);

  let sumDiff = 0;
  for (let i = 0; i < reqs.length; i++) {
    const l = live[i];
    const s = sim[i];
    t.equal(l.status, 200);
    t.equal(l.prompt, reqs[i].inputTokens, `#${i} prompt tokens`);
    t.equal(l.out, s.outputTokens, `#${i} output tokens`);
    const diff = l.ttftMs - s.ttftMs;
    sumDiff += Math.abs(diff);
    t.ok(Math.abs(diff) <= ABS_MS + REL * s.ttftMs + jitterMs, `#${i} ttft live ${l.ttftMs.toFixed(1)} vs sim ${s.ttftMs.toFixed(1)} ms`);
  }
  t.ok(sumDiff / reqs.length <= MEAN_MS + jitterMs, `mean |diff| ${(sumDiff / reqs.length).toFixed(1)} ms`);
});

async function liveRun(reqs: SimRequest[]): Promise<{ live: Awaited<ReturnType<typeof liveRequests>>; loopDelayP99Ms: number }> {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  try {
    const live = await liveRequests(reqs);
    // the histogram counts the sampling interval itself: only what exceeds it is lateness
    return { live, loopDelayP99Ms: Math.max(0, delay.percentile(99) / 1e6 - 5) };
  } finally {
    delay.disable();
  }
}

async function liveRequests(reqs: SimRequest[]) {
  // one ephemeral port each (port 0 with count > 1 takes consecutive ports, which may be in use)
  const servers = [];
  for (let i = 0; i < ENDPOINTS; i++) servers.push(await startMockServers({ model: 'm', port: 0, timeScale: TIME_SCALE }));
  const mocks = { endpoints: servers.map((m) => m.endpoints[0]), close: async () => { for (const m of servers) await m.close(); } };
  const agent = new Agent({ connections: 32 });
  try {
    // warm up (JIT, connections) with unrelated prompts, then let the servers go idle
    for (const ep of mocks.endpoints) {
      const r = await request(`http://${ep}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: 'warm up '.repeat(64), max_tokens: 2 }), dispatcher: agent });
      await r.body.text();
    }
    const t0 = performance.now();
    return await Promise.all(
      reqs.map(async (r, i) => {
        const due = t0 + r.arrivalMs / TIME_SCALE;
        await new Promise((res) => setTimeout(res, Math.max(0, due - performance.now())));
        const sent = performance.now();
        const res = await request(`http://${mocks.endpoints[i % ENDPOINTS]}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', prompt: r.prompt, max_tokens: r.outputTokens, stream: true, stream_options: { include_usage: true } }),
          dispatcher: agent,
        });
        let first = NaN;
        let text = '';
        for await (const chunk of res.body) {
          if (Number.isNaN(first) && chunk.includes('data:')) first = performance.now();
          text += chunk.toString();
        }
        const usage = [...text.matchAll(/"usage":(\{.*?\}\})/g)].map((m) => JSON.parse(m[1]));
        const u = usage[usage.length - 1];
        return { status: res.statusCode, ttftMs: (first - sent) * TIME_SCALE, cached: u?.prompt_tokens_details?.cached_tokens, out: u?.completion_tokens, prompt: u?.prompt_tokens };
      }),
    );
  } finally {
    await agent.close();
    await mocks.close();
  }
}
