/**
 * `reliability`: what the gateway does under attack and overload, as figures a CI job can hold it to.
 * A real gateway process (`serve`) in front of real `infergate mock` servers; clients on raw sockets.
 *
 *  - cases: each attacker class of reliability-cases.ts, `--cases N` tries (a few at once); per class:
 *    crashes (the gateway process died), hangs (no answer and no close by the try's deadline), silent
 *    truncations (a 200 whose framing is whole but whose content is not), leaked upstream requests (the
 *    gateway's in-flight count and the mocks' running + waiting, once nothing should run), wrong accepts
 *    (a try that should be refused reached a model server: its answer came from one, or the mocks ran
 *    more requests than the class's acceptable tries), malformed answers, error bodies not in OpenAI's shape.
 *  - overload: closed-loop streaming clients, `--offered X` times the mocks' batch slots, plus two
 *    clients that send near-limit token-id prompts without pause; the TTFT of admitted requests, the share
 *    refused (429), the gateway's event-loop delay (its own p99 from /metrics: nodejs_eventloop_lag_p99_seconds), admin /healthz latency,
 *    peak RSS.
 *  - soak: half the slots' worth of clients for `--soak-s`; RSS growth after a warm-up.
 *  - parse: the gateway's per-request CPU for bodies (checks, JSON.parse, prompt head and length) per MB,
 *    in this process, against the whole-prompt rendering it replaced.
 * Writes DIR/reliability.json.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, FormData, Pool, Request, request } from 'undici';
import { INFERGATE_CLI, Progress, clockTicks, freePort, freePortRange, numOpt, percentileSorted, procCpuTicks, round, sleep, startProcess, writeResult, type Proc } from './common.js';
import { promSums } from './prom.js';
import { finalAnswer, rawExchange, judge, type RawResult } from './rawhttp.js';
import { CASES, type CaseTry, type Target } from './reliability-cases.js';
import { checkBody } from '../src/gateway/request-checks.js';
import { formForServer, readAudioForm } from '../src/gateway/audio-form.js';
import { renderPrompt, renderPromptHead } from '../src/openai/prompt.js';

const MODEL = 'bench-model';
const MOCKS = 2;
const SLOTS_PER_MOCK = 8;
const MAX_BODY = 4 * 1024 * 1024;

export interface CaseFigures {
  name: string;
  tried: number;
  crashes: number;
  hangs: number;
  silent_truncations: number;
  leaked_upstreams: number;
  wrong_accepts: number;
  malformed_answers: number;
  bad_error_bodies: number;
  /** answers seen, by status ("close" when the connection was closed without one) */
  outcomes: Record<string, number>;
  /** the first few failing tries, said how */
  failures: string[];
}

interface Setup {
  dir: string;
  mocks: Proc;
  endpoints: string[];
  gw: GatewayProc;
}

interface GatewayProc {
  proc: Proc;
  target: Target;
  adminUrl: string;
  exited: boolean;
}

async function startMocks(): Promise<{ proc: Proc; endpoints: string[] }> {
  const base = await freePortRange(MOCKS);
  const proc = await startProcess(
    process.execPath,
    [INFERGATE_CLI, 'mock', '--port', String(base), '--count', String(MOCKS), '--model', MODEL, '--time-scale', '20', '--max-num-seqs', String(SLOTS_PER_MOCK), '--seed', '1'],
    { readyPattern: /^mock listening on http:\/\/\S+/, readyCount: MOCKS, name: 'infergate mock', timeoutMs: 30_000 },
  );
  const endpoints = proc.ready.map((l) => /http:\/\/(\S+)/.exec(l)![1]);
  return { proc, endpoints };
}

async function startGw(dir: string, endpoints: string[]): Promise<GatewayProc> {
  const port = await freePort();
  let adminPort = await freePort();
  while (adminPort === port) adminPort = await freePort();
  const config = {
    listen: { host: '127.0.0.1', port },
    admin: { host: '127.0.0.1', port: adminPort },
    debug_headers: true,
    auth: { mode: 'none', allow_unauthenticated: true },
    logging: { level: 'error', access_log: false },
    limits: { max_body_bytes: MAX_BODY, request_timeout: '60s', first_byte_timeout: '20s' },
    models: [{ name: MODEL, pool: 'rel' }],
    pools: { rel: { endpoints, policy: 'scored', metrics: { interval: '200ms', stale_after: '2s' }, saturation: { queue_depth: 8 } } },
  };
  const file = path.join(dir, `gateway-${port}.yaml`);
  writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
  const proc = await startProcess(process.execPath, [INFERGATE_CLI, 'serve', '--config', file], {
    readyPattern: /^admin listening on/,
    name: 'infergate serve',
    timeoutMs: 30_000,
  });
  const gw: GatewayProc = {
    proc,
    target: { host: '127.0.0.1', port, authority: `127.0.0.1:${port}`, model: MODEL, maxBodyBytes: MAX_BODY },
    adminUrl: `http://127.0.0.1:${adminPort}`,
    exited: false,
  };
  proc.child.once('exit', () => (gw.exited = true));
  return gw;
}

async function getText(url: string, timeoutMs = 3_000): Promise<{ status: number; text: string }> {
  const r = await request(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: r.statusCode, text: await r.body.text() };
}

/** Requests the mocks ran to the end (any reason) plus those running or waiting now. */
async function mocksTaken(endpoints: string[]): Promise<number> {
  let n = 0;
  for (const ep of endpoints) {
    const m = promSums((await getText(`http://${ep}/metrics`)).text);
    n += (m.get('vllm:request_success_total') ?? 0) + (m.get('vllm:num_requests_running') ?? 0) + (m.get('vllm:num_requests_waiting') ?? 0);
  }
  return n;
}

/** Work still in flight: the gateway's per-endpoint counts and the mocks' running + waiting. */
async function inFlight(s: Setup): Promise<number> {
  let n = 0;
  if (!s.gw.exited) {
    const pools = JSON.parse((await getText(`${s.gw.adminUrl}/debug/pools`)).text) as Record<string, { endpoints: Array<{ in_flight: number }> }>;
    for (const p of Object.values(pools)) for (const e of p.endpoints) n += e.in_flight;
  }
  for (const ep of s.endpoints) {
    const st = JSON.parse((await getText(`http://${ep}/mock/state`)).text) as { running: number; waiting: number };
    n += st.running + st.waiting;
  }
  return n;
}

/** Waits (up to `ms`) for nothing to be in flight; returns what is left then (0: drained). */
async function drained(s: Setup, ms: number): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const n = await inFlight(s);
    if (n === 0 || Date.now() > end) return n;
    await sleep(100);
  }
}

async function runClass(s: Setup, c: (typeof CASES)[number], tries: number, parallel: number): Promise<CaseFigures> {
  const fig: CaseFigures = { name: c.name, tried: 0, crashes: 0, hangs: 0, silent_truncations: 0, leaked_upstreams: 0, wrong_accepts: 0, malformed_answers: 0, bad_error_bodies: 0, outcomes: {}, failures: [] };
  const fail = (why: string): void => {
    if (fig.failures.length < 5) fig.failures.push(why);
  };
  const takenBefore = await mocksTaken(s.endpoints);
  let acceptable = 0; // tries a model server may run
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < tries) {
      const i = next++;
      if (s.gw.exited) return;
      const tr: CaseTry = c.make(s.gw.target, i);
      if (!tr.refuse) acceptable++;
      const r: RawResult = await rawExchange(tr.plan);
      fig.tried++;
      const first = finalAnswer(r.responses);
      const key = first ? String(first.status) : r.clientAborted ? 'client_gone' : r.closed ? 'close' : 'none';
      fig.outcomes[key] = (fig.outcomes[key] ?? 0) + 1;
      if (r.timedOut && !r.clientAborted && !(first && first.complete)) {
        fig.hangs++;
        fail(`hang: ${tr.label} (${first ? `status ${first.status}, body unfinished` : 'no answer, no close'} after ${tr.plan.deadlineMs} ms)`);
      }
      if (r.malformed) {
        fig.malformed_answers++;
        fail(`malformed: ${tr.label}: ${r.malformed}`);
      }
      for (const resp of r.responses) {
        if (!resp.complete) continue;
        const j = judge(resp);
        if (tr.stream && resp.status === 200 && !(resp.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          fig.silent_truncations++;
          fail(`a stream asked for, a 200 without text/event-stream: ${tr.label}`);
        }
        if (j.truncated) {
          fig.silent_truncations++;
          fail(`silent truncation: ${tr.label}: …${resp.body.toString().slice(-80)}`);
        }
        if (!j.errorShape) {
          fig.bad_error_bodies++;
          fail(`error body not OpenAI's: ${tr.label}: ${resp.body.toString().slice(0, 120)}`);
        }
      }
      if (tr.refuse && r.responses.some((x) => x.headers['x-infergate-endpoint'] !== undefined || (x.status >= 200 && x.status < 300))) {
        fig.wrong_accepts++;
        fail(`wrong accept: ${tr.label}: ${r.responses.map((x) => x.status).join(', ')}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, tries) }, one));
  if (s.gw.exited) {
    fig.crashes++;
    fail(`the gateway exited; its last output: ${s.gw.proc.output().slice(-500)}`);
    s.gw = await startGw(s.dir, s.endpoints);
  }
  fig.leaked_upstreams = await drained(s, 15_000);
  if (fig.leaked_upstreams > 0) fail(`${fig.leaked_upstreams} requests still in flight 15 s after the class ended`);
  const taken = (await mocksTaken(s.endpoints)) - takenBefore;
  if (taken > acceptable) {
    const extra = taken - acceptable;
    if (extra > fig.wrong_accepts) fail(`the mocks ran ${taken} requests; at most ${acceptable} tries were acceptable`);
    fig.wrong_accepts = Math.max(fig.wrong_accepts, extra);
  }
  return fig;
}

/** Near-limit token-id completions body (the expensive valid body of the hardening issue). */
function tokenIdBody(bytes: number, salt: number): Buffer {
  const ids: number[] = [];
  let n = 64;
  for (let k = 0; n < bytes; k++) {
    const id = (k * 7919 + salt) % 128_000;
    ids.push(id);
    n += String(id).length + 1;
  }
  return Buffer.from(JSON.stringify({ model: MODEL, prompt: ids, max_tokens: 1 }));
}

function rssMb(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

interface LoadStats {
  ttftMs: number[];
  ok: number;
  rejected: number;
  failed: number;
  total: number;
  /** failures by status, or by the client's error code */
  failures: Record<string, number>;
  /** the heavy clients' answers by status */
  heavy: Record<string, number>;
}

/**
 * Closed-loop streaming clients for `ms`: each sends, reads the whole answer, and sends again (after a
 * 429, 50 ms later). `heavy` more clients send near-limit token-id prompts.
 */
async function load(s: Setup, clients: number, heavy: number, ms: number, onTick?: () => Promise<void>): Promise<LoadStats> {
  const agent = new Agent({ connections: clients + heavy + 4, keepAliveTimeout: 5_000 });
  const st: LoadStats = { ttftMs: [], ok: 0, rejected: 0, failed: 0, total: 0, failures: {}, heavy: {} };
  const failed = (why: string): void => {
    st.failed++;
    st.failures[why] = (st.failures[why] ?? 0) + 1;
  };
  const end = Date.now() + ms;
  const url = s.gw.target;
  const heavyBody = heavy > 0 ? tokenIdBody(Math.floor(MAX_BODY * 0.95), 3) : Buffer.alloc(0);
  const client = async (i: number, isHeavy: boolean): Promise<void> => {
    let k = 0;
    while (Date.now() < end) {
      k++;
      const body = isHeavy
        ? heavyBody
        : JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `client ${i} turn ${k}: ${'tell me about routing '.repeat(4)}` }], max_tokens: 24, stream: true });
      const t0 = performance.now();
      try {
        const r = await request(`http://${url.authority}${isHeavy ? '/v1/completions' : '/v1/chat/completions'}`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
          dispatcher: agent,
          signal: AbortSignal.timeout(30_000),
        });
        let first = 0;
        for await (const _ of r.body) if (first === 0) first = performance.now();
        st.total++;
        if (isHeavy) st.heavy[r.statusCode] = (st.heavy[r.statusCode] ?? 0) + 1;
        if (r.statusCode === 200) {
          st.ok++;
          if (!isHeavy) st.ttftMs.push((first || performance.now()) - t0);
        } else if (r.statusCode === 429) {
          st.rejected++;
          await sleep(50);
        } else failed(`${isHeavy ? 'heavy ' : ''}${r.statusCode}`);
      } catch (e) {
        st.total++;
        failed(`${isHeavy ? 'heavy ' : ''}${(e as { code?: string }).code ?? (e as Error).name}`);
        await sleep(50);
      }
    }
  };
  const ticker = (async () => {
    while (Date.now() < end) {
      if (onTick) await onTick().catch(() => undefined);
      await sleep(200);
    }
  })();
  await Promise.all([...Array.from({ length: clients }, (_, i) => client(i, false)), ...Array.from({ length: heavy }, (_, i) => client(i, true)), ticker]);
  await agent.close();
  return st;
}

async function overload(s: Setup, offered: number, heavy: number, seconds: number): Promise<Record<string, unknown>> {
  const slots = MOCKS * SLOTS_PER_MOCK;
  const clients = Math.round(offered * slots);
  const loopLag: number[] = [];
  const admin: number[] = [];
  let peakRss = 0;
  const pid = s.gw.proc.child.pid;
  await getText(`${s.gw.adminUrl}/metrics`); // prom-client's event-loop histogram restarts at each scrape
  let lastScrape = 0;
  const cpu = (p: number | undefined): number => {
    const c = p === undefined ? null : procCpuTicks(p);
    return c ? (c.user + c.sys) / clockTicks() : 0;
  };
  const gwCpu0 = cpu(pid);
  const mockCpu0 = cpu(s.mocks.child.pid);
  const stats = await load(s, clients, heavy, seconds * 1000, async () => {
    peakRss = Math.max(peakRss, rssMb(pid));
    const t0 = performance.now();
    const h = await getText(`${s.gw.adminUrl}/healthz`);
    if (h.status === 200) admin.push(performance.now() - t0);
    if (Date.now() - lastScrape >= 1_000) {
      lastScrape = Date.now();
      const m = promSums((await getText(`${s.gw.adminUrl}/metrics`)).text);
      // prom-client's default metric: its standard name, or with the prefix earlier builds gave it
      const lag = m.get('nodejs_eventloop_lag_p99_seconds') ?? m.get('infergate_nodejs_eventloop_lag_p99_seconds');
      if (lag !== undefined) loopLag.push(lag * 1000);
    }
  });
  const gwCpu = cpu(pid) - gwCpu0;
  const mockCpu = cpu(s.mocks.child.pid) - mockCpu0;
  const ttft = Float64Array.from(stats.ttftMs).sort();
  const adm = Float64Array.from(admin).sort();
  return {
    offered_x_capacity: offered,
    clients,
    heavy_clients: heavy,
    heavy_answers: stats.heavy,
    requests: stats.total,
    admitted: stats.ok,
    failed: stats.failed,
    failed_by: stats.failures,
    admitted_ttft_p50_ms: round(percentileSorted(ttft, 0.5), 1),
    admitted_ttft_p99_ms: round(percentileSorted(ttft, 0.99), 1),
    rejected_share: round(stats.total > 0 ? stats.rejected / stats.total : 0, 3),
    event_loop_delay_p99_ms: round(loopLag.length ? Math.max(...loopLag) : 0, 1),
    admin_p99_ms: round(percentileSorted(adm, 0.99), 1),
    peak_rss_mb: round(peakRss, 1),
    // CPU seconds each process got in the window: how busy the gateway was, and who else took the cores
    gateway_cpu_s: round(gwCpu, 2),
    mocks_cpu_s: round(mockCpu, 2),
  };
}

async function soak(s: Setup, seconds: number): Promise<Record<string, unknown>> {
  const pid = s.gw.proc.child.pid;
  const warmMs = Math.min(10_000, (seconds * 1000) / 3);
  const samples: Array<[number, number]> = [];
  const t0 = Date.now();
  let indexAtWarm: number | null = null;
  const stats = await load(s, (MOCKS * SLOTS_PER_MOCK) / 2, 0, seconds * 1000, async () => {
    samples.push([Date.now() - t0, rssMb(pid)]);
    if (indexAtWarm === null && Date.now() - t0 >= warmMs) indexAtWarm = await indexBytes(s);
  });
  const indexAtEnd = await indexBytes(s);
  const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  const afterWarm = samples.filter(([t]) => t >= warmMs).map(([, r]) => r);
  const start = mean(afterWarm.slice(0, 5));
  const endRss = mean(afterWarm.slice(-5));
  return {
    seconds,
    warmup_seconds: round(warmMs / 1000, 1),
    requests: stats.total,
    failed: stats.failed,
    failed_by: stats.failures,
    rss_after_warmup_mb: round(start, 1),
    rss_end_mb: round(endRss, 1),
    rss_growth_mb: round(endRss - start, 1),
    // the prefix index fills up to its bound (every soak prompt is new): its own estimate of its growth
    prefix_index_growth_mb: round(((indexAtEnd ?? 0) - (indexAtWarm ?? 0)) / 2 ** 20, 1),
  };
}

/** The prefix index's own size estimate, all pools (GET /debug/pools), in bytes. */
async function indexBytes(s: Setup): Promise<number | null> {
  try {
    const pools = JSON.parse((await getText(`${s.gw.adminUrl}/debug/pools`)).text) as Record<string, { index: { approxBytes: number } }>;
    return Object.values(pools).reduce((n, p) => n + p.index.approxBytes, 0);
  } catch {
    return null;
  }
}

/** This process's CPU time (user + system) in ms: on a shared machine, unlike wall time, it does not count waiting for a core. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** The gateway's per-body CPU, in this process: checkBody + renderPromptHead, and the old full render (median of `reps`). */
export function parseCost(mb: number, reps: number): Array<Record<string, number | string>> {
  const bytes = Math.floor(mb * 1024 * 1024);
  const shapes: Array<[string, 'chat' | 'completions', Buffer]> = [
    ['token_ids', 'completions', tokenIdBody(bytes, 1)],
    ['chat_text', 'chat', Buffer.from(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello world '.repeat(Math.floor(bytes / 12)) }] }))],
    ['many_messages', 'chat', Buffer.from(JSON.stringify({ model: MODEL, messages: Array.from({ length: Math.floor(bytes / 60) }, (_, i) => ({ role: 'user', content: `message ${i} says hello there` })) }))],
  ];
  const out: Array<Record<string, number | string>> = [];
  for (const [name, kind, raw] of shapes) {
    const check: number[] = [];
    const head: number[] = [];
    const full: number[] = [];
    for (let r = 0; r < reps; r++) {
      const t0 = cpuMs();
      const c = checkBody(kind, raw, 64);
      const t1 = cpuMs();
      if ('error' in c) throw new Error(`parse bench body ${name} refused: ${c.error.message}`);
      renderPromptHead(c.body, 64 * 2048);
      const t2 = cpuMs();
      renderPrompt(c.body);
      const t3 = cpuMs();
      check.push(t1 - t0);
      head.push(t2 - t1);
      full.push(t3 - t2);
    }
    const med = (xs: number[]): number => percentileSorted(Float64Array.from(xs).sort(), 0.5);
    const m = raw.length / (1024 * 1024);
    out.push({
      body: name,
      mb: round(m, 2),
      check_and_parse_ms_per_mb: round(med(check) / m, 2),
      prompt_head_ms_per_mb: round(med(head) / m, 2),
      whole_render_ms_per_mb: round(med(full) / m, 2),
    });
  }
  return out;
}

/**
 * An audio API's form as the gateway handles it, for a file of `mb` MB: read (readAudioForm: CPU per MB,
 * median of `reps`), then sent with the resolved model through an undici Pool to a local server that
 * drains it (formForServer: undici encodes the form as it writes it; wall time per MB, the server's reading
 * included), and the longest the event loop was held meanwhile (the largest gap between two turns of a
 * setImmediate ticker, over all reps): the stall every other request on this process sees while one upload
 * is handled.
 */
export async function formCost(mb: number, reps: number): Promise<Record<string, number | string>> {
  const fd = new FormData();
  fd.append('model', MODEL);
  fd.append('file', new Blob([Buffer.alloc(Math.floor(mb * 1024 * 1024), 7)], { type: 'audio/wav' }), 'speech.wav');
  const req = new Request('http://x/', { method: 'POST', body: fd });
  const raw = Buffer.from(await req.arrayBuffer());
  const type = req.headers.get('content-type')!;
  const sink = http.createServer((r, res) => {
    r.resume();
    r.on('end', () => res.end('{}'));
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const upstream = new Pool(`http://127.0.0.1:${(sink.address() as AddressInfo).port}`);
  let longest = 0;
  let last = performance.now();
  let ticking = true;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const read: number[] = [];
  const send: number[] = [];
  try {
    for (let r = 0; r < reps; r++) {
      await new Promise((resolve) => setImmediate(resolve));
      const t0 = cpuMs();
      const f = await readAudioForm('/v1/audio/transcriptions', raw, type);
      read.push(cpuMs() - t0);
      if ('error' in f) throw new Error(`form bench body refused: ${f.error.message}`);
      const w0 = performance.now();
      const answer = await upstream.request({ path: '/v1/audio/transcriptions', method: 'POST', body: formForServer(f.form, MODEL) });
      await answer.body.dump();
      send.push(performance.now() - w0);
    }
  } finally {
    ticking = false;
    await upstream.close();
    await new Promise((resolve) => sink.close(resolve));
  }
  const med = (xs: number[]): number => percentileSorted(Float64Array.from(xs).sort(), 0.5);
  const m = raw.length / (1024 * 1024);
  return { body: 'audio_form', mb: round(m, 2), read_ms_per_mb: round(med(read) / m, 2), send_ms_per_mb: round(med(send) / m, 2), longest_event_loop_stall_ms: round(longest, 1) };
}

export async function runReliability(opts: Map<string, string>): Promise<number> {
  const quick = opts.has('quick');
  const tries = numOpt(opts, 'cases', quick ? 12 : 40);
  const overloadS = numOpt(opts, 'overload-s', quick ? 12 : 60);
  const soakS = numOpt(opts, 'soak-s', quick ? 25 : 600);
  const offered = numOpt(opts, 'offered', 4);
  const heavy = numOpt(opts, 'heavy', 2);
  const outDir = opts.get('out') ?? 'bench-out';
  const dir = path.join(os.tmpdir(), `infergate-reliability-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const started = Date.now();
  const mocks = await startMocks();
  const s: Setup = { dir, mocks: mocks.proc, endpoints: mocks.endpoints, gw: await startGw(dir, mocks.endpoints) };
  let code = 0;
  try {
    const cases: CaseFigures[] = [];
    // on a terminal: which part runs, k/N and the time left (quiet in logs and CI; the result lines stay)
    const progress = new Progress('reliability', CASES.length + (soakS > 0 ? 1 : 0) + (overloadS > 0 ? 1 : 0));
    for (const c of CASES) {
      progress.step(`${c.name}: ${tries} tries`);
      const fig = await runClass(s, c, tries, 12);
      progress.stepDone(); // most of a class's time is spent waiting (idle timeouts)
      cases.push(fig);
      process.stderr.write(`${c.name}: ${fig.tried} tried, ${fig.crashes} crashes, ${fig.hangs} hangs, ${fig.silent_truncations} truncations, ${fig.leaked_upstreams} leaked, ${fig.wrong_accepts} wrong accepts ${JSON.stringify(fig.outcomes)}\n`);
      for (const f of fig.failures) process.stderr.write(`  ${f}\n`);
    }
    // the soak before the overload: after it, the heap the overload grew shrinks back and hides growth
    if (soakS > 0) progress.step(`soak for ${soakS} s`);
    const so = soakS > 0 ? await soak(s, soakS) : null;
    if (so) {
      progress.stepDone();
      process.stderr.write(`soak: ${JSON.stringify(so)}\n`);
    }
    if (overloadS > 0) progress.step(`overload at ${offered}x capacity for ${overloadS} s`);
    const over = overloadS > 0 ? await overload(s, offered, heavy, overloadS) : null;
    if (over) {
      progress.stepDone();
      process.stderr.write(`overload: ${JSON.stringify(over)}\n`);
    }
    progress.finish();
    const overLeak = await drained(s, 15_000);
    const parse = parseCost(quick ? 1 : 4, 7);
    const formParse = [await formCost(1, 7), await formCost(25, 5)];
    const bad = cases.reduce((n, c) => n + c.crashes + c.hangs + c.silent_truncations + c.leaked_upstreams + c.wrong_accepts, 0) + overLeak + (s.gw.exited ? 1 : 0);
    const file = writeResult(
      outDir,
      'reliability.json',
      'reliability',
      { quick, cases_per_class: tries, overload_s: overloadS, soak_s: soakS, offered_x_capacity: offered, heavy_clients: heavy, mocks: MOCKS, slots_per_mock: SLOTS_PER_MOCK, max_body_bytes: MAX_BODY, seconds: round((Date.now() - started) / 1000, 1) },
      { cases, overload: over ? { ...over, leaked_after: overLeak } : null, soak: so, parse, form_parse: formParse, gateway_alive: !s.gw.exited },
    );
    console.log(`wrote ${file}${bad > 0 ? ` — ${bad} problems (crashes, hangs, truncations, leaks, wrong accepts): see the cases' failures` : ''}`);
    code = bad > 0 ? 1 : 0;
  } finally {
    await s.gw.proc.stop();
    await s.mocks.stop();
    rmSync(dir, { recursive: true, force: true }); // the gateway configs written there
  }
  return code;
}
