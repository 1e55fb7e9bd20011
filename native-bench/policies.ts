/**
 * `policies`: the live system against the simulator. For each policy, K mock servers (fresh,
 * so every policy starts cold) and the gateway run as real processes; the workload is replayed open-loop
 * as real streaming requests at its arrival times / time-scale; the client measures TTFT, ITL, e2e,
 * throughput, errors and 429s; the mocks' /metrics are polled for prefix-cache hits and per-endpoint load.
 * The same workload then runs through `runSimulation`, and live/simulated ratios are printed.
 *
 * Times: a mock with --time-scale X runs X× faster than real time, so every client-measured duration is
 * multiplied by X (throughputs divided by X) to be in engine time, the simulator's unit. The raw
 * measurements are kept under `live_real`.
 */
import { ENGINE_FLAGS } from './engine-flags.js';
import type { RunFigures } from '../src/sim/types.js';
import { setMaxListeners } from 'node:events';
import { mkdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { generateWorkload } from '../src/sim/generators.js';
import { loadTrace, traceRequestText } from '../src/sim/trace.js';
import { runSimulation } from '../src/sim/simulate.js';
import { SIM_MODEL } from '../src/sim/config.js';
import type { PerRequestItl, SimRequest, RunResult as SimRun } from '../src/sim/types.js';
import { perRequestItl } from '../src/sim/stats.js';
import type { EngineProfile } from '../src/engine/index.js';
import { renderPrompt } from '../src/openai/prompt.js';
import { INFERGATE_CLI, Progress, REPO_ROOT, freePortRange, numOpt, round, sleep, startProcess, summarize, writeResult, type Proc, type Summary } from './common.js';
import { startGateway, type Gateway } from './gateway.js';
import { DEFAULT_LAG_BOUND_P99_MS, checkLag, runSchedule, type LagReport } from './lag.js';
import { vllmSample, type VllmSample } from './prom.js';
import { renderPoliciesReport } from './report.js';
import { offeredFigures, sloSpecs, type SloSpec } from '../src/sim/slo.js';
import { parseDuration } from '../src/common/units.js';
import { streamCompletion, type StreamOutcome } from './stream.js';

export const DEFAULT_POLICIES = ['round_robin', 'least_request', 'scored'];
/** The trace shipped in the repository (native-bench/traces/README.md). */
export const DEFAULT_TRACE = path.join(REPO_ROOT, 'native-bench', 'traces', 'mooncake-first400.jsonl');


export interface EndpointLoad {
  endpoint: string;
  requests: number;
  mean_running: number;
  max_running: number;
  mean_waiting: number;
  mean_kv_cache: number;
  busy_fraction: number;
}

export interface LiveRun extends RunFigures {
  live_real: { ttft_ms: Summary; itl_ms: Summary; e2e_ms: Summary; throughput_rps: number; output_tokens_per_s: number; duration_s: number };
  lag: LagReport;
  valid: boolean;
  invalid_reason?: string;
  status_counts: Record<string, number>;
  /** x-infergate-endpoint → completed requests */
  served_by: Record<string, number>;
  error_samples: string[];
  per_endpoint: EndpointLoad[];
  /** for the report: per endpoint, [t_s, running, waiting, kv] samples (real seconds since the first send) */
  timeseries: Record<string, Array<[number, number, number, number]>>;
  /** for the report: TTFT values in engine ms (sorted) */
  ttft_values_ms: number[];
  /** for the report: per offered request, TTFT in engine ms (Infinity when shed or failed) */
  ttft_offered_values_ms: number[];
}

interface Workload { label: string; requests: SimRequest[] }

export function loadWorkload(opts: Map<string, string>): Workload {
  const limit = opts.has('requests') ? numOpt(opts, 'requests', Infinity) : Infinity;
  const seed = numOpt(opts, 'seed', 1);
  const gen = opts.get('generate');
  if (gen) {
    return { label: `generate:${gen}`, requests: generateWorkload(gen, { seed, requests: Number.isFinite(limit) ? limit : undefined }) };
  }
  const trace = path.resolve(opts.get('trace') ?? DEFAULT_TRACE);
  return { label: trace, requests: loadTrace(trace, limit) };
}

function modelOf(r: SimRequest): string {
  return r.model ?? r.lora ?? SIM_MODEL;
}

/** The chat request body for a workload request; its prompt text is built from hash_ids (shared ids → shared text). */
export function requestBody(r: SimRequest, seed: number): Record<string, unknown> {
  return {
    model: modelOf(r),
    messages: [{ role: 'user', content: traceRequestText(r.hashIds, r.inputTokens, seed) }],
    max_tokens: r.outputTokens,
    stream: true,
  };
}

async function startMocks(count: number, timeScale: number, loras: string[], engineArgs: string[], seed: number): Promise<{ proc: Proc; endpoints: string[] }> {
  const base = await freePortRange(count);
  const args = [INFERGATE_CLI, 'mock', '--port', String(base), '--count', String(count), '--model', SIM_MODEL, '--time-scale', String(timeScale), '--seed', String(seed), ...engineArgs];
  if (loras.length) args.push('--lora', loras.join(','));
  const proc = await startProcess(process.execPath, args, { readyPattern: /mock listening on https?:\/\//, readyCount: count, name: 'infergate mock', timeoutMs: 30000 });
  const endpoints = proc.ready.map((l) => /https?:\/\/([^/\s]+)/.exec(l)![1].replace('0.0.0.0', '127.0.0.1'));
  return { proc, endpoints };
}

class MetricsPoller {
  readonly samples = new Map<string, Array<[number, number, number, number]>>();
  readonly last = new Map<string, VllmSample>();
  private timer: NodeJS.Timeout | null = null;
  private pools = new Map<string, Pool>();
  private busy = false;
  constructor(private readonly endpoints: string[], private readonly t0: () => number, private readonly intervalMs = 250) {
    for (const e of endpoints) {
      this.pools.set(e, new Pool(`http://${e}`, { connections: 1, headersTimeout: 5000, bodyTimeout: 5000 }));
      this.samples.set(e, []);
    }
  }
  async pollOnce(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    const t = (performance.now() - this.t0()) / 1000;
    await Promise.all(this.endpoints.map(async (e) => {
      try {
        const res = await this.pools.get(e)!.request({ path: '/metrics', method: 'GET' });
        const s = vllmSample(await res.body.text());
        this.last.set(e, s);
        this.samples.get(e)!.push([round(t, 3), s.running, s.waiting, round(s.kv, 4)]);
      } catch {
        /* a missed sample */
      }
    }));
    this.busy = false;
  }
  start(): void {
    this.timer = setInterval(() => void this.pollOnce(), this.intervalMs);
  }
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.pollOnce();
    await Promise.all([...this.pools.values()].map((p) => p.close().catch(() => undefined)));
  }
}

async function waitReady(gw: Gateway, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  const pool = new Pool(`http://127.0.0.1:${gw.adminPort}`, { connections: 1 });
  try {
    while (Date.now() < until) {
      try {
        const r = await pool.request({ path: '/readyz', method: 'GET' });
        await r.body.dump();
        if (r.statusCode === 200) return;
      } catch { /* not yet */ }
      await sleep(100);
    }
  } finally {
    await pool.close();
  }
}

export interface LiveSettings {
  endpoints: number;
  timeScale: number;
  seed: number;
  engineArgs: string[];
  lagBoundMs: number;
  drainS: number;
  metricsIntervalMs: number;
  staleAfterMs: number;
  tmp: string;
  slos: SloSpec[];
  progress: Progress;
}

async function runLivePolicy(policy: string, reqs: SimRequest[], s: LiveSettings): Promise<LiveRun> {
  const loras = [...new Set(reqs.map((r) => r.lora).filter((x): x is string => !!x))].sort();
  const models = [...new Set(reqs.map(modelOf))];
  const mocks = await startMocks(s.endpoints, s.timeScale, loras, s.engineArgs, s.seed);
  const progress = s.progress;
  let gw: Gateway | null = null;
  let poller: MetricsPoller | null = null;
  const outcomes: Array<StreamOutcome | null> = new Array(reqs.length).fill(null);
  let t0 = 0;
  let lastEnd = 0;
  let lags: Float64Array = new Float64Array(0);
  try {
    gw = await startGateway({
      dir: s.tmp, model: SIM_MODEL, endpoints: mocks.endpoints, policy, debugHeaders: true,
      extraModels: models.filter((m) => m !== SIM_MODEL),
      pool: { metrics: { interval: `${s.metricsIntervalMs}ms`, stale_after: `${s.staleAfterMs}ms` } },
    });
    await waitReady(gw, 10000);
    await sleep(Math.max(300, 3 * s.metricsIntervalMs)); // first scrapes in
    const dispatcher = new Pool(gw.url, { connections: 4096, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 30_000 });
    const abort = new AbortController();
    setMaxListeners(reqs.length + 16, abort.signal);
    const schedule = Float64Array.from(reqs, (r) => (r.arrivalMs - reqs[0].arrivalMs) / s.timeScale);
    const bodies: Array<Buffer | null> = new Array(reqs.length).fill(null);
    let done = 0, errors = 0, rejected = 0, inflight = 0;
    const pending: Array<Promise<void>> = [];
    poller = new MetricsPoller(mocks.endpoints, () => t0);
    const total = reqs.length;
    const startedAt = performance.now();
    t0 = startedAt;
    poller.start();
    const prog = setInterval(() => {
      const el = (performance.now() - startedAt) / 1000;
      progress.line(`${policy}: ${done}/${total} requests done, ${inflight} in flight, ${round(done / Math.max(el, 0.001), 1)} req/s, errors ${errors}, 429s ${rejected}, ${round(el, 0)} s`);
    }, 1000);
    const span = schedule.length ? schedule[schedule.length - 1] : 0;
    const deadlineTimer = setTimeout(() => abort.abort(), span + s.drainS * 1000);
    try {
      const res = await runSchedule({
        scheduleMs: schedule,
        deadlineMs: span + s.drainS * 1000,
        prepare: (i) => { bodies[i] = Buffer.from(JSON.stringify(requestBody(reqs[i], s.seed))); },
        send: (i) => {
          const body = bodies[i] ?? Buffer.from(JSON.stringify(requestBody(reqs[i], s.seed)));
          bodies[i] = null;
          inflight++;
          pending.push(streamCompletion(dispatcher, '/v1/chat/completions', body, abort.signal).then((o) => {
            outcomes[i] = o;
            inflight--;
            done++;
            if (o.status === 429) rejected++;
            else if (o.error) errors++;
            lastEnd = performance.now();
          }));
        },
      });
      lags = res.lags;
      await Promise.all(pending);
    } finally {
      clearTimeout(deadlineTimer);
      clearInterval(prog);
      progress.stepDone(`${policy}: ${done}/${total} done, errors ${errors}, 429s ${rejected}, ${round((performance.now() - startedAt) / 1000, 1)} s`);
      await dispatcher.close().catch(() => undefined);
    }
  } finally {
    if (poller) await poller.stop();
    if (gw) await gw.proc.stop();
    await mocks.proc.stop();
  }
  return summarizeLive(policy, reqs.length, outcomes, lags, t0, lastEnd, poller!, mocks.endpoints, s);
}

function scaledPerRequest(f: PerRequestItl, scale: (x: Summary) => Summary): PerRequestItl {
  return { requests: f.requests, mean: scale(f.mean), p99: scale(f.p99) };
}

function summarizeLive(policy: string, n: number, outcomes: Array<StreamOutcome | null>, lags: Float64Array, t0: number, lastEnd: number, poller: MetricsPoller, endpoints: string[], s: LiveSettings): LiveRun {
  const X = s.timeScale;
  const ok = outcomes.filter((o): o is StreamOutcome => !!o && o.status === 200 && !o.error);
  const ttft = ok.map((o) => o.ttftMs);
  const itl = ok.flatMap((o) => o.itlMs);
  const e2e = ok.map((o) => o.e2eMs);
  const tokens = ok.reduce((a, o) => a + o.tokens, 0);
  const durS = Math.max(1e-3, (lastEnd - t0) / 1000);
  const statusCounts: Record<string, number> = {};
  const errorSamples: string[] = [];
  let errors = 0, rejected = 0;
  for (const o of outcomes) {
    const k = o ? String(o.status || 'no response') : 'not sent';
    statusCounts[k] = (statusCounts[k] ?? 0) + 1;
    if (!o) { errors++; continue; }
    if (o.status === 429) rejected++;
    else if (o.error) { errors++; if (errorSamples.length < 5) errorSamples.push(o.error); }
  }
  const scale = (x: Summary): Summary => ({ p50: round(x.p50 * X), p90: round(x.p90 * X), p99: round(x.p99 * X), mean: round(x.mean * X) });
  const real = { ttft_ms: summarize(ttft), itl_ms: summarize(itl), e2e_ms: summarize(e2e), throughput_rps: round(ok.length / durS), output_tokens_per_s: round(tokens / durS, 1), duration_s: round(durS, 2) };
  let hits = 0, queries = 0;
  for (const e of endpoints) { const l = poller.last.get(e); if (l) { hits += l.prefixHits; queries += l.prefixQueries; } }
  const served = new Map<string, number>();
  for (const o of ok) if (o.endpoint) served.set(o.endpoint, (served.get(o.endpoint) ?? 0) + 1);
  const perEndpoint: EndpointLoad[] = endpoints.map((e) => {
    const smp = (poller.samples.get(e) ?? []).filter(([t]) => t * 1000 <= lastEnd - t0 + 250);
    const mean = (k: 1 | 2 | 3): number => (smp.length ? smp.reduce((a, x) => a + x[k], 0) / smp.length : 0);
    return {
      endpoint: e,
      requests: served.get(e) ?? 0,
      mean_running: round(mean(1), 2),
      max_running: Math.max(0, ...smp.map((x) => x[1])),
      mean_waiting: round(mean(2), 2),
      mean_kv_cache: round(mean(3), 4),
      busy_fraction: round(smp.length ? smp.filter((x) => x[1] + x[2] > 0).length / smp.length : 0, 3),
    };
  });
  const lag = checkLag(lags, s.lagBoundMs);
  const run: LiveRun = {
    policy,
    requests: n,
    completed: ok.length,
    errors,
    rejected,
    ttft_ms: scale(real.ttft_ms),
    itl_ms: scale(real.itl_ms),
    itl_per_request_ms: scaledPerRequest(perRequestItl(ok.map((o) => o.itlMs)), scale),
    e2e_ms: scale(real.e2e_ms),
    throughput_rps: round(real.throughput_rps / X),
    output_tokens_per_s: round(real.output_tokens_per_s / X, 1),
    prefix_cache_hit_rate: queries > 0 ? round(hits / queries, 4) : 0,
    live_real: real,
    lag,
    valid: lag.valid,
    status_counts: statusCounts,
    served_by: Object.fromEntries(served),
    error_samples: errorSamples,
    per_endpoint: perEndpoint,
    timeseries: Object.fromEntries(endpoints.map((e) => [e, poller.samples.get(e) ?? []])),
    ttft_values_ms: ttft.map((v) => round(v * X, 2)).sort((a, b) => a - b),
    ttft_offered_values_ms: [],
  };
  // The yardstick over offered requests, in engine time like the rest (shared/spec/README.md).
  const isOk = (o: StreamOutcome | null): o is StreamOutcome => !!o && o.status === 200 && !o.error;
  const offeredTtft = outcomes.map((o) => (isOk(o) ? o.ttftMs * X : NaN));
  const meanItl = outcomes.map((o) => (isOk(o) ? (o.itlMs.length ? (o.itlMs.reduce((a, b) => a + b, 0) / o.itlMs.length) * X : 0) : NaN));
  Object.assign(run, offeredFigures(offeredTtft, meanItl, rejected, durS * X, s.slos));
  run.ttft_offered_values_ms = offeredTtft.map((v) => (Number.isNaN(v) ? Infinity : round(v, 2)));
  if (!lag.valid) run.invalid_reason = lag.invalid_reason;
  return run;
}

export const COMPARED: Array<[label: string, get: (r: { ttft_ms: Summary; itl_ms: Summary; e2e_ms: Summary; throughput_rps: number; output_tokens_per_s: number; prefix_cache_hit_rate: number }) => number]> = [
  ['ttft p50', (r) => r.ttft_ms.p50],
  ['ttft p99', (r) => r.ttft_ms.p99],
  ['itl p50', (r) => r.itl_ms.p50],
  ['itl mean', (r) => r.itl_ms.mean],
  ['itl p99', (r) => r.itl_ms.p99],
  ['e2e p50', (r) => r.e2e_ms.p50],
  ['e2e p99', (r) => r.e2e_ms.p99],
  ['throughput rps', (r) => r.throughput_rps],
  ['output tok/s', (r) => r.output_tokens_per_s],
  ['prefix hit rate', (r) => r.prefix_cache_hit_rate],
];

export interface Comparison { policy: string; metric: string; live: number; simulated: number; ratio: number | null; within_20pct: boolean | null }

export function compare(live: LiveRun[], sim: SimRun[]): Comparison[] {
  const out: Comparison[] = [];
  for (const l of live) {
    const s = sim.find((x) => x.policy === l.policy);
    if (!s) continue;
    for (const [metric, get] of COMPARED) {
      const a = get(l), b = get(s);
      const ratio = b > 0 ? round(a / b, 3) : a === 0 ? 1 : null;
      out.push({ policy: l.policy, metric, live: a, simulated: b, ratio, within_20pct: ratio === null ? null : Math.abs(ratio - 1) <= 0.2 });
    }
  }
  return out;
}

export async function runPolicies(opts: Map<string, string>): Promise<number> {
  const out = opts.get('out') ?? 'bench-out';
  const endpoints = numOpt(opts, 'endpoints', 4);
  const timeScale = numOpt(opts, 'time-scale', 10);
  const seed = numOpt(opts, 'seed', 1);
  const policies = (opts.get('policies') ?? DEFAULT_POLICIES.join(',')).split(',').map((p) => p.trim()).filter(Boolean);
  const lagBoundMs = numOpt(opts, 'lag-bound-ms', DEFAULT_LAG_BOUND_P99_MS);
  const drainS = numOpt(opts, 'drain-s', 120);
  const metricsIntervalMs = numOpt(opts, 'metrics-interval-ms', 50);
  const staleAfterMs = numOpt(opts, 'stale-after-ms', 1000);
  const doSim = !opts.has('no-sim');
  const durationList = (name: string): number[] | undefined => opts.get(name)?.split(',').map((v) => {
    const ms = /^\d+(\.\d+)?$/.test(v.trim()) ? null : parseDuration(v);
    if (ms === null || !(ms > 0)) throw new Error(`--${name} takes durations with a unit, such as 2s or 100ms, not "${v}"`);
    return ms;
  });
  const slos = sloSpecs(durationList('slo-ttft'), durationList('slo-itl')?.[0], durationList('slo-headline')?.[0]);
  const engineArgs: string[] = [];
  const profile: Partial<EngineProfile> = {};
  for (const [flag, key] of ENGINE_FLAGS) {
    if (opts.has(flag)) {
      engineArgs.push(`--${flag}`, opts.get(flag)!);
      (profile as Record<string, number>)[key] = numOpt(opts, flag, 0);
    }
  }
  const wl = loadWorkload(opts);
  if (wl.requests.length === 0) throw new Error('the workload is empty');
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'infergate-policies-'));
  const progress = new Progress('policies', policies.length);
  const settings: LiveSettings = { endpoints, timeScale, seed, engineArgs, lagBoundMs, drainS, metricsIntervalMs, staleAfterMs, tmp, slos, progress };
  const span = (wl.requests[wl.requests.length - 1].arrivalMs - wl.requests[0].arrivalMs) / timeScale / 1000;
  process.stderr.write(`policies: ${wl.requests.length} requests from ${wl.label}, ${endpoints} mocks, time-scale ${timeScale} (schedule ${round(span, 1)} s real per policy), policies ${policies.join(', ')}\n`);
  const live: LiveRun[] = [];
  try {
    for (const p of policies) {
      progress.step(`${p}: starting mocks and the gateway`);
      live.push(await runLivePolicy(p, wl.requests, settings));
    }
    progress.finish();
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // The same workload through the simulator: same engine flags, endpoints and requests; the prompt is the
  // exact text the mock renders, so both see the same tokens and prefix hashes. The live gateway's metric
  // scrape interval, in engine time, is interval × time-scale: the simulator is told so.
  let sim: ReturnType<typeof runSimulation> | null = null;
  let simError: string | null = null;
  if (doSim) {
    try {
      const t = performance.now();
      const simReqs = wl.requests.map((r) => ({ ...r, prompt: renderPrompt(requestBody(r, seed)) }));
      sim = runSimulation({
        requests: simReqs, trace: wl.label, endpoints, profile, policies, seed, slos,
        pool: { metrics: { interval: metricsIntervalMs * timeScale, stale_after: staleAfterMs * timeScale } },
      });
      process.stderr.write(`simulate: ${round((performance.now() - t) / 1000, 1)} s\n`);
    } catch (e) {
      simError = (e as Error).message;
      process.stderr.write(`simulate failed: ${simError}\n`);
    }
  }
  const comparison = sim ? compare(live, sim.runs) : [];
  const invalid = live.filter((r) => !r.valid);
  const valid = invalid.length === 0;
  const runsForJson = live.map(({ timeseries: _ts, ttft_values_ms: _tv, ttft_offered_values_ms: _to, ...rest }) => rest);
  const body: Record<string, unknown> = {
    valid,
    ...(valid ? {} : { invalid_reason: invalid.map((r) => `${r.policy}: ${r.invalid_reason}`).join('; ') }),
    time_scale: timeScale,
    time_note: `The mocks run ${timeScale}x faster than real time. ttft_ms, itl_ms, e2e_ms are client-measured real ms x ${timeScale} (engine ms, the simulator's unit); throughput_rps and output_tokens_per_s are real rates / ${timeScale}. Raw client figures are under live_real. Gateway and network time (real) is scaled too, so it weighs ${timeScale}x more than in a real deployment.`,
    workload: { trace: wl.label, requests: wl.requests.length, endpoints, seed },
    runs: runsForJson,
    simulated: sim ? { workload: sim.workload, runs: sim.runs } : null,
    ...(simError ? { simulate_error: simError } : {}),
    comparison,
    agreement: comparison.length ? { within_20pct: comparison.filter((c) => c.within_20pct).length, of: comparison.length } : null,
    timeseries: Object.fromEntries(live.map((r) => [r.policy, r.timeseries])),
  };
  const settingsJson = { slo: slos.map((x) => ({ ttft_ms: x.ttftMs, itl_ms: x.itlMs })), endpoints, time_scale: timeScale, seed, policies, requests: wl.requests.length, workload: wl.label, engine_flags: engineArgs, lag_bound_p99_ms: lagBoundMs, drain_s: drainS, gateway_metrics_interval_ms: metricsIntervalMs, gateway_stale_after_ms: staleAfterMs, metrics_poll_ms: 250, client: 'undici Pool, open loop, streaming chat completions' };
  const file = writeResult(out, 'result.json', 'policies', settingsJson, body);
  mkdirSync(out, { recursive: true });
  const html = renderPoliciesReport({ settings: settingsJson, live, sim: sim?.runs ?? [], comparison, valid, invalidReason: body.invalid_reason as string | undefined, timeScale });
  const htmlFile = path.join(out, 'report.html');
  writeFileSync(htmlFile, html);
  printTable(live, sim?.runs ?? [], timeScale);
  if (!valid) console.log(`\nINVALID RUN: ${body.invalid_reason}`);
  console.log(`\nwrote ${file}\nwrote ${htmlFile}`);
  return 0;
}

function printTable(live: LiveRun[], sim: SimRun[], X: number): void {
  const lines: string[] = [`\nlive (engine time = real × ${X}) vs simulated, ratio live/sim:`];
  const head = ['policy', 'metric', 'live', 'sim', 'ratio'];
  lines.push(`${head[0].padEnd(14)} ${head[1].padEnd(16)} ${head[2].padStart(10)} ${head[3].padStart(10)} ${head[4].padStart(7)}`);
  for (const l of live) {
    const s = sim.find((x) => x.policy === l.policy);
    for (const [metric, get] of COMPARED) {
      const a = get(l);
      const b = s ? get(s) : NaN;
      const r = s && b > 0 ? round(a / b, 2) : NaN;
      lines.push(`${l.policy.padEnd(14)} ${metric.padEnd(16)} ${String(round(a, 2)).padStart(10)} ${String(s ? round(b, 2) : '-').padStart(10)} ${String(Number.isNaN(r) ? '-' : r).padStart(7)}${!Number.isNaN(r) && Math.abs(r - 1) > 0.2 ? '  *' : ''}`);
    }
    lines.push(`${l.policy.padEnd(14)} ${'errors/429s'.padEnd(16)} ${`${l.errors}/${l.rejected}`.padStart(10)} ${s ? `${s.errors}/${s.rejected}` : '-'}`.padEnd(0) + `   client lag p99 ${l.lag.p99_ms} ms${l.valid ? '' : ' INVALID'}`);
  }
  lines.push('(* = outside ±20%)');
  console.log(lines.join('\n'));
}
