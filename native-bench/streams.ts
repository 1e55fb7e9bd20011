/**
 * `streams`: long streams, as LLM traffic really is. The bench upstream answers every streaming request with
 * E events paced at R per second (each stamped with its send time on this machine's monotonic clock and its
 * index); a load generator in this process holds S concurrent streams (closed loop: a finished stream is
 * followed at once by the next on the same connection) directly, through nginx (1 worker, `proxy_buffering
 * off`) and through infergate, interleaved per step of S, each proxy started fresh for its cell. Per cell,
 * over a window of D seconds once all S streams are open: events relayed per second, the proxy's CPU per
 * relayed event (user + sys from /proc), its RSS per open stream (RSS during the window minus RSS idle, over
 * S), the delay each event saw (arrival − its stamp), and whether the generator kept up (`valid`). Then no
 * new streams are started and every started stream is checked to have arrived whole (status 200, events
 * 0..E−1 in order, then `[DONE]`).
 *
 * The generator does little per event: one undici Client (one connection) per stream slot, the raw
 * `dispatch` handler API (no streams, no string decoding), and a byte scan for `data: {"t":` in each chunk.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHistogram, monitorEventLoopDelay, type RecordableHistogram } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Client, Pool, type Dispatcher } from 'undici';
import { Progress, clockTicks, freePort, numOpt, round, sleep, startProcess, writeResult, type Proc } from './common.js';
import { gatewayAvailable, startGateway, type Gateway } from './gateway.js';
import { startNginx, type Nginx } from './nginx.js';
import { cpuTicks } from './overhead.js';
import { topFunctions } from './profile.js';
import { UPSTREAM_MODEL, monotonicUs } from './upstream.js';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cli.js');
/** `relay` (the bare uWS + undici floor of `overhead`) only when asked for: a reference, not a target of the issue. */
const TARGETS = ['direct', 'nginx', 'relay', 'infergate'] as const;
const DEFAULT_TARGETS = 'direct,nginx,infergate';
type Target = (typeof TARGETS)[number];
/** The step of S at which the issue's targets are judged. */
export const VERDICT_STREAMS = 1000;
export const STREAM_TARGETS = { cpu_per_event_vs_nginx_max: 1.0, rss_per_stream_vs_nginx_max: 2.0, event_delay_p99_vs_nginx_max: 1.5 };
/** A generator whose own CPU share over the window reaches this is saturated (one JS thread). */
const CLIENT_CPU_LIMIT = 0.9;
/** The open-file limit this scenario raises itself (and so its children) to, at least. */
const NOFILE = 65536;
const NOFILE_ENV = 'INFERGATE_BENCH_NOFILE_RAISED';
/** The drain after a window waits while events arrive, at most this long (or 3 stream lengths if more)... */
const DRAIN_CAP_S = 120;
/** ...and gives up on streams that saw no event for this long. */
const DRAIN_STALL_S = 10;

export interface StreamsEntry {
  name: Target;
  streams: number;
  /** events received per second over the window, all streams together */
  events_per_s: number;
  /** S × R: what the upstream offers when every stream is open and on pace */
  offered_events_per_s: number;
  /** the proxy's user + sys CPU per relayed event (nginx: master and worker); null for direct */
  cpu_us_per_event: number | null;
  cpu_us_per_event_split: { user: number; sys: number } | null;
  /** (RSS during the window − RSS idle) / S; null for direct */
  rss_per_stream_kb: number | null;
  rss_kb: { idle: number; at_streams: number; peak: number } | null;
  /** arrival − the event's send stamp, per event in the window */
  event_delay_ms: { p50: number; p90: number; p99: number; max: number };
  events_in_window: number;
  /** every stream started in the cell (window and drain) ended whole */
  whole: boolean;
  streams_started: number;
  streams_whole: number;
  streams_broken: number;
  broken_reasons: Record<string, number>;
  client: { cpu_cores: number; loop_delay_p99_ms: number };
  upstream_cpu_cores: number | null;
  /** with --profile, infergate's cells: its top functions by self time over the whole cell */
  profile?: ReturnType<typeof topFunctions>;
  /** whether the load generator kept up (its event-loop delay and CPU share within bounds) */
  valid: boolean;
  invalid_reason?: string;
}

// ---------------------------------------------------------------------------------------------------------
// The load generator

const MARK = Buffer.from('data: {"t":');
const DONE = Buffer.from('data: [DONE]');
const EVENT_END = Buffer.from('\n\n');

/** What all slots of one cell share: counters, the delay histogram, and whether to keep going. */
export class StreamLoad {
  running = true;
  measuring = false;
  eventsInWindow = 0;
  started = 0;
  whole = 0;
  broken = 0;
  readonly reasons = new Map<string, number>();
  readonly delayUs: RecordableHistogram = createHistogram();
  busy = 0;
  private idleWaiters: Array<() => void> = [];
  constructor(readonly events: number) {}
  /** events received in the whole cell (to tell a slow drain from a stalled one) */
  eventsTotal = 0;
  event(delayUs: number): void {
    this.eventsTotal++;
    if (!this.measuring) return;
    this.eventsInWindow++;
    this.delayUs.record(delayUs >= 1 ? delayUs : 1);
  }
  ended(reason: string | null): void {
    if (reason === null) this.whole++;
    else {
      this.broken++;
      if (this.reasons.size < 8 || this.reasons.has(reason)) this.reasons.set(reason, (this.reasons.get(reason) ?? 0) + 1);
    }
    if (--this.busy === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
  idle(): Promise<void> {
    return this.busy === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }
}

/**
 * One stream at a time on one connection: reads the paced answer as raw bytes, records each event's delay,
 * checks the indices run 0..E−1 and `[DONE]` closes the stream, then starts the next one.
 */
export class StreamSlot implements Dispatcher.DispatchHandler {
  private next = 0;
  private done = false;
  private status = 0;
  private problem: string | null = null;
  private tail: Buffer | null = null;
  private controller: Dispatcher.DispatchController | null = null;
  active = false;
  constructor(
    private readonly load: StreamLoad,
    private readonly client: Dispatcher,
    private readonly body: Buffer,
    private readonly path = '/v1/chat/completions',
  ) {}

  start(): void {
    this.next = 0;
    this.done = false;
    this.status = 0;
    this.problem = null;
    this.tail = null;
    this.controller = null;
    this.active = true;
    this.load.busy++;
    this.load.started++;
    this.client.dispatch({ path: this.path, method: 'POST', body: this.body, headers: { 'content-type': 'application/json', accept: 'text/event-stream' } }, this);
  }

  abort(reason: string): void {
    this.controller?.abort(new Error(reason));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
    if (statusCode !== 200) this.problem = `HTTP ${statusCode}`;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.status !== 200) return;
    const now = monotonicUs();
    let buf = chunk;
    if (this.tail) {
      buf = Buffer.concat([this.tail, chunk]);
      this.tail = null;
    }
    // complete events only: up to the last blank line; the rest waits for the next chunk
    const len = buf.length;
    const end = len >= 2 && buf[len - 1] === 10 && buf[len - 2] === 10 ? len - 2 : buf.lastIndexOf(EVENT_END);
    if (end < 0) {
      this.tail = Buffer.from(buf);
      return;
    }
    if (end + 2 < buf.length) this.tail = Buffer.from(buf.subarray(end + 2));
    let pos = 0;
    for (;;) {
      const i = buf.indexOf(MARK, pos);
      if (i < 0 || i > end) break;
      let j = i + MARK.length;
      let t = 0;
      let c = buf[j];
      while (c >= 48 && c <= 57) {
        t = t * 10 + (c - 48);
        c = buf[++j];
      }
      let n = -1;
      // `,"n":` follows the stamp
      if (buf[j] === 44 && buf[j + 1] === 34 && buf[j + 2] === 110 && buf[j + 3] === 34 && buf[j + 4] === 58) {
        j += 5;
        n = 0;
        c = buf[j];
        while (c >= 48 && c <= 57) {
          n = n * 10 + (c - 48);
          c = buf[++j];
        }
      }
      if (this.problem === null && (n !== this.next || this.done)) this.problem = this.done ? 'event after [DONE]' : n < 0 ? 'event without its index' : n > this.next ? 'events missing' : 'events repeated or out of order';
      this.next = n + 1;
      this.load.event(now - t);
      pos = j;
    }
    const d = buf.indexOf(DONE, pos);
    if (d >= 0 && d < end) this.done = true;
  }

  onResponseEnd(): void {
    let reason = this.problem;
    if (reason === null && this.tail && this.tail.length > 0) reason = 'bytes after the last event';
    if (reason === null && !this.done) reason = this.next === this.load.events ? 'no [DONE]' : 'stream ended early';
    if (reason === null && this.next !== this.load.events) reason = this.next < this.load.events ? 'events missing' : 'too many events';
    this.finish(reason);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.finish(`transport: ${err.message}`);
  }

  private finish(reason: string | null): void {
    if (!this.active) return;
    this.active = false;
    this.load.ended(reason);
    if (!this.load.running) return;
    // the next stream on the same connection (after a pause if this one failed, so a broken target
    // cannot spin the loop)
    if (reason === null) setImmediate(() => this.load.running && this.start());
    else setTimeout(() => this.load.running && this.start(), 100);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Process figures from /proc

/** Resident set size of the processes in kB (VmRSS from /proc/PID/status), or null where /proc lacks them. */
export function rssKb(pids: number[]): number | null {
  let sum = 0;
  for (const pid of pids) {
    try {
      const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (!m) return null;
      sum += Number(m[1]);
    } catch {
      return null;
    }
  }
  return sum;
}

/** A process and its children (nginx: master and worker). */
function withChildren(pid: number): number[] {
  try {
    return [pid, ...readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)];
  } catch {
    return [pid];
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : 0;
}

/** The open-file limit of processes started from here (`ulimit -n` of a child shell). */
function openFileLimit(): number {
  const r = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' });
  const v = r.stdout?.trim();
  return v === 'unlimited' ? Infinity : Number(v) || 0;
}

/**
 * Runs this very command again under `sh -c 'ulimit -n …; exec …'` when the open-file limit is below what
 * the largest step needs, so that this process (the generator) and its children (upstream, nginx,
 * infergate) may hold the sockets. Returns the child's exit code, or null when no re-run was needed.
 */
async function rerunWithMoreFiles(need: number): Promise<number | null> {
  if (openFileLimit() >= need || process.env[NOFILE_ENV]) return null;
  const want = Math.max(NOFILE, need);
  const { spawn } = await import('node:child_process');
  // as many as allowed: the wanted number (root may raise the hard limit), else up to the hard limit
  const script = `{ ulimit -n ${want} || ulimit -n "$(ulimit -Hn)"; } 2>/dev/null; exec "$0" "$@"`;
  const child = spawn('sh', ['-c', script, process.execPath, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, [NOFILE_ENV]: '1' } });
  const stop = (sig: NodeJS.Signals): void => void child.kill(sig);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return new Promise((resolve) => child.once('exit', (code, sig) => resolve(code ?? (sig ? 1 : 0))));
}

// ---------------------------------------------------------------------------------------------------------
// The scenario

interface CellSettings { events: number; rate: number; durationS: number; warmupS: number; rampS: number; lagBoundMs: number; clkTck: number }

async function warmProxy(url: string): Promise<void> {
  // a few plain (non-streaming) requests: the proxy's code paths and its upstream connection are made
  // before its idle RSS is read
  const pool = new Pool(url, { connections: 4 });
  const body = JSON.stringify({ model: UPSTREAM_MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 });
  try {
    for (let i = 0; i < 40; i++) {
      const r = await pool.request({ path: '/v1/chat/completions', method: 'POST', body, headers: { 'content-type': 'application/json' } });
      await r.body.dump();
    }
  } finally {
    await pool.close();
  }
}

async function runCell(name: Target, url: string, streams: number, proxyPids: () => number[], upstreamPid: number, s: CellSettings, progress: Progress): Promise<StreamsEntry> {
  const load = new StreamLoad(s.events);
  const body = Buffer.from(JSON.stringify({ model: UPSTREAM_MODEL, messages: [{ role: 'user', content: 'Write a long answer.' }], max_tokens: s.events, stream: true }));
  const clients: Client[] = [];
  const slots: StreamSlot[] = [];
  const limits = Math.ceil(Math.max(60_000, ((s.events / s.rate) * 4 + 30) * 1000));
  for (let i = 0; i < streams; i++) {
    const c = new Client(url, { pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: limits, bodyTimeout: limits, connect: { timeout: 30_000 } });
    clients.push(c);
    slots.push(new StreamSlot(load, c, body));
  }
  const isProxy = name !== 'direct';
  const pids = proxyPids();
  const rssIdle = isProxy ? rssKb(pids) : null;
  try {
    // ramp: slot i starts at i/S of the ramp, so that the streams' event phases spread out
    const t0 = performance.now();
    let started = 0;
    while (started < streams) {
      const due = Math.min(streams, Math.floor(((performance.now() - t0) / (s.rampS * 1000)) * streams) + 1);
      while (started < due) slots[started++].start();
      await sleep(1);
    }
    progress.line(`${name} S=${streams}: ${streams} streams opened, warming up ${s.warmupS} s`);
    await sleep(s.warmupS * 1000);
    // the window
    const eld = monitorEventLoopDelay({ resolution: 10 });
    eld.enable();
    const cpu0 = isProxy ? cpuTicks(pids[0], name === 'nginx') : null;
    const up0 = cpuTicks(upstreamPid);
    const client0 = process.cpuUsage();
    const w0 = performance.now();
    load.measuring = true;
    const rss: number[] = [];
    const windowMs = s.durationS * 1000;
    while (performance.now() - w0 < windowMs) {
      await sleep(Math.min(1000, windowMs - (performance.now() - w0)));
      if (isProxy) {
        const r = rssKb(proxyPids());
        if (r !== null) rss.push(r);
      }
      progress.line(`${name} S=${streams}: ${Math.round((performance.now() - w0) / 1000)}/${s.durationS} s, ${load.eventsInWindow} events`);
    }
    load.measuring = false;
    const wallS = (performance.now() - w0) / 1000;
    const clientCpu = process.cpuUsage(client0);
    const cpu1 = isProxy ? cpuTicks(pids[0], name === 'nginx') : null;
    const up1 = cpuTicks(upstreamPid);
    eld.disable();
    // drain: no new streams; every started one must end. A slow target is waited for as long as events
    // keep arriving (up to DRAIN_CAP_S); streams still open after DRAIN_STALL_S without any event, or at
    // the cap, are cut and count as not whole.
    load.running = false;
    const d0 = performance.now();
    let lastEvents = load.eventsTotal;
    let lastProgress = d0;
    let cut: string | null = null;
    while (load.busy > 0) {
      await Promise.race([load.idle(), sleep(500)]);
      const now = performance.now();
      if (load.eventsTotal !== lastEvents) {
        lastEvents = load.eventsTotal;
        lastProgress = now;
      }
      progress.line(`${name} S=${streams}: draining, ${load.busy} streams still open`);
      if (load.busy === 0) break;
      if (now - lastProgress > DRAIN_STALL_S * 1000) cut = `stalled: no event for ${DRAIN_STALL_S} s in the drain`;
      else if (now - d0 > Math.max(DRAIN_CAP_S * 1000, ((3 * s.events) / s.rate) * 1000)) cut = 'still open at the drain cap';
      if (cut) {
        for (const sl of slots) if (sl.active) sl.abort(cut);
        await Promise.race([load.idle(), sleep(5000)]);
        break;
      }
    }

    const ev = load.eventsInWindow;
    const ms = (q: number): number => round(ev ? load.delayUs.percentile(q) / 1000 : 0);
    const clientCores = (clientCpu.user + clientCpu.system) / 1e6 / wallS;
    const loopP99 = eld.percentile(99) / 1e6;
    const e: StreamsEntry = {
      name, streams,
      events_per_s: round(ev / wallS, 1),
      offered_events_per_s: streams * s.rate,
      cpu_us_per_event: null,
      cpu_us_per_event_split: null,
      rss_per_stream_kb: null,
      rss_kb: null,
      event_delay_ms: { p50: ms(50), p90: ms(90), p99: ms(99), max: round(ev ? load.delayUs.max / 1000 : 0) },
      events_in_window: ev,
      whole: load.broken === 0 && load.whole === load.started,
      streams_started: load.started,
      streams_whole: load.whole,
      streams_broken: load.broken,
      broken_reasons: Object.fromEntries(load.reasons),
      client: { cpu_cores: round(clientCores, 2), loop_delay_p99_ms: round(loopP99, 1) },
      upstream_cpu_cores: up0 && up1 ? round((up1[0] + up1[1] - up0[0] - up0[1]) / s.clkTck / wallS, 2) : null,
      valid: true,
    };
    if (cpu0 && cpu1 && ev > 0) {
      const us = (ticks: number): number => (ticks * 1e6) / s.clkTck / ev;
      e.cpu_us_per_event_split = { user: round(us(cpu1[0] - cpu0[0]), 2), sys: round(us(cpu1[1] - cpu0[1]), 2) };
      e.cpu_us_per_event = round(us(cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1]), 2);
    }
    if (rssIdle !== null && rss.length) {
      const at = median(rss);
      e.rss_kb = { idle: rssIdle, at_streams: at, peak: Math.max(...rss) };
      e.rss_per_stream_kb = round((at - rssIdle) / streams, 2);
    }
    const why: string[] = [];
    if (loopP99 > s.lagBoundMs) why.push(`the load generator's event-loop delay p99 was ${round(loopP99, 1)} ms > ${s.lagBoundMs} ms`);
    if (clientCores >= CLIENT_CPU_LIMIT) why.push(`the load generator used ${round(clientCores, 2)} cores (≥ ${CLIENT_CPU_LIMIT}: saturated)`);
    if (ev === 0) why.push('no event arrived in the window');
    if (why.length) {
      e.valid = false;
      e.invalid_reason = why.join('; ');
    }
    return e;
  } finally {
    load.running = false;
    await Promise.all(clients.map((c) => c.destroy().catch(() => undefined)));
  }
}

/** infergate ÷ nginx per step; each proxy's delay over direct's. */
function ratiosOf(entries: StreamsEntry[], steps: number[]): Array<Record<string, number | null>> {
  const div = (a: number | null | undefined, b: number | null | undefined): number | null => (a == null || b == null || b <= 0 ? null : round(a / b));
  return steps.map((S) => {
    const d = entries.find((e) => e.name === 'direct' && e.streams === S);
    const n = entries.find((e) => e.name === 'nginx' && e.streams === S);
    const g = entries.find((e) => e.name === 'infergate' && e.streams === S);
    return {
      streams: S,
      events_per_s_infergate_vs_nginx: div(g?.events_per_s, n?.events_per_s),
      cpu_per_event_infergate_vs_nginx: div(g?.cpu_us_per_event, n?.cpu_us_per_event),
      rss_per_stream_infergate_vs_nginx: div(g?.rss_per_stream_kb, n?.rss_per_stream_kb),
      event_delay_p99_infergate_vs_nginx: div(g?.event_delay_ms.p99, n?.event_delay_ms.p99),
      nginx_delay_p99_over_direct_ms: n && d ? round(n.event_delay_ms.p99 - d.event_delay_ms.p99) : null,
      infergate_delay_p99_over_direct_ms: g && d ? round(g.event_delay_ms.p99 - d.event_delay_ms.p99) : null,
    };
  });
}

export interface VerdictItem { target: string; limit: string; streams: number | null; value: number | boolean | null; met: boolean | null; valid: boolean | null; note?: string }

/** The issue's targets at S = 1,000, each with its value and met / not met (null: not measured). */
export function streamsVerdict(entries: StreamsEntry[]): { met: boolean | null; items: VerdictItem[] } {
  const at = (name: Target) => entries.find((e) => e.name === name && e.streams === VERDICT_STREAMS);
  const n = at('nginx');
  const g = at('infergate');
  const valid = n && g ? n.valid && g.valid : null;
  const ratio = (target: string, limit: number, a: number | null | undefined, b: number | null | undefined): VerdictItem => {
    const value = a == null || b == null || b <= 0 ? null : round(a / b);
    return {
      target, limit: `≤ ${limit}× nginx`, streams: n && g ? VERDICT_STREAMS : null, value, met: value === null ? null : value <= limit, valid,
      ...(n && g ? {} : { note: `needs nginx and infergate at S = ${VERDICT_STREAMS}` }),
    };
  };
  const items: VerdictItem[] = [
    ratio('cpu_us_per_event: infergate ÷ nginx', STREAM_TARGETS.cpu_per_event_vs_nginx_max, g?.cpu_us_per_event, n?.cpu_us_per_event),
    ratio('rss_per_stream_kb: infergate ÷ nginx', STREAM_TARGETS.rss_per_stream_vs_nginx_max, g?.rss_per_stream_kb, n?.rss_per_stream_kb),
    ratio('event_delay_ms.p99: infergate ÷ nginx', STREAM_TARGETS.event_delay_p99_vs_nginx_max, g?.event_delay_ms.p99, n?.event_delay_ms.p99),
  ];
  const gs = entries.filter((e) => e.name === 'infergate');
  items.push({ target: 'every stream through infergate arrived whole (all steps)', limit: 'true', streams: null, value: gs.length ? gs.every((e) => e.whole) : null, met: gs.length ? gs.every((e) => e.whole) : null, valid: gs.length ? gs.every((e) => e.valid) : null });
  const mets = items.map((i) => i.met);
  return { met: mets.some((m) => m === null) ? null : mets.every(Boolean), items };
}

function parseList(v: string | undefined, def: string): string[] {
  return (v ?? def).split(',').map((x) => x.trim()).filter(Boolean);
}

export async function runStreams(opts: Map<string, string>): Promise<void> {
  const steps = parseList(opts.get('streams'), '100,1000,4000').map(Number);
  const events = numOpt(opts, 'events', 256);
  const rate = numOpt(opts, 'rate', 30);
  const durationS = numOpt(opts, 'duration', 10);
  const warmupS = numOpt(opts, 'warmup', 2);
  const rampS = numOpt(opts, 'ramp', 1);
  const lagBoundMs = numOpt(opts, 'lag-bound-ms', 50);
  const doProfile = opts.has('profile');
  const out = opts.get('out') ?? 'bench-out';
  const wanted = parseList(opts.get('targets'), DEFAULT_TARGETS);
  for (const S of steps) if (!Number.isInteger(S) || S < 1) throw new Error(`--streams must list integers ≥ 1, not ${opts.get('streams')}`);
  if (!Number.isInteger(events) || events < 2) throw new Error(`--events must be an integer ≥ 2, not ${events}`);
  if (!(rate > 0 && rate <= 1000)) throw new Error(`--rate must be in (0, 1000] events/s, not ${rate}`);
  if (!(durationS > 0) || !(warmupS >= 0) || !(rampS > 0)) throw new Error('--duration and --ramp must be > 0, --warmup ≥ 0');
  for (const t of wanted) if (!(TARGETS as readonly string[]).includes(t)) throw new Error(`--targets: unknown target ${t} (known: ${TARGETS.join(', ')})`);
  const notes: string[] = [];
  let targets = TARGETS.filter((t) => wanted.includes(t));
  if (targets.includes('infergate') && !gatewayAvailable()) {
    notes.push('infergate skipped: its CLI is not built');
    targets = targets.filter((t) => t !== 'infergate');
  }

  // A proxy holds two sockets per stream (client and upstream side); nginx is allowed 3 S + 1,024.
  const need = 3 * Math.max(...steps) + 1100;
  const rerun = await rerunWithMoreFiles(need);
  if (rerun !== null) {
    process.exitCode = rerun;
    return;
  }
  const nofile = openFileLimit();
  if (nofile < need) throw new Error(`open-file limit is ${nofile}, S = ${Math.max(...steps)} needs about ${need} (two sockets per stream in a proxy, and room for idle ones); raise the hard limit (ulimit -Hn) or lower --streams`);

  const s: CellSettings = { events, rate, durationS, warmupS, rampS, lagBoundMs, clkTck: clockTicks() };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'infergate-streams-'));
  const entries: StreamsEntry[] = [];
  let upstream: Proc | null = null;
  let nginxVersion: string | null = null;
  const progress = new Progress('streams', steps.length * targets.length);
  try {
    const upPort = await freePort();
    upstream = await startProcess(process.execPath, [CLI, 'upstream', '--port', String(upPort), '--events', String(events), '--rate', String(rate)], { readyPattern: /^upstream listening/, name: 'upstream' });
    const upstreamPid = upstream.child.pid!;
    for (const S of steps) {
      // interleaved per step: drift in the machine's load hits every target of a step alike
      for (const t of targets) {
        progress.step(`${t} S=${S}: starting`);
        let nginx: Nginx | null = null;
        let gw: Gateway | null = null;
        let relay: Proc | null = null;
        try {
          let url = `http://127.0.0.1:${upPort}`;
          let pids: () => number[] = () => [];
          if (t === 'nginx') {
            // worker_connections counts client, upstream and idle cached upstream connections: 2 S + 256 was too
            // few at S = 4,000 ("worker_connections are not enough, reusing connections": it then closed
            // keep-alive client connections under the generator)
            nginx = await startNginx(path.join(dir, `nginx-${S}`), await freePort(), upPort, { workerConnections: 3 * S + 1024, upstreamKeepalive: Math.max(128, S) });
            nginxVersion = nginx.version;
            const pid = nginx.pid;
            pids = () => withChildren(pid);
            url = `http://127.0.0.1:${nginx.port}`;
          } else if (t === 'relay') {
            const port = await freePort();
            relay = await startProcess(process.execPath, [CLI, 'relay', '--port', String(port), '--upstream', `http://127.0.0.1:${upPort}`], { readyPattern: /^relay listening/, name: 'relay' });
            const pid = relay.child.pid!;
            pids = () => [pid];
            url = `http://127.0.0.1:${port}`;
          } else if (t === 'infergate') {
            gw = await startGateway({
              dir, model: UPSTREAM_MODEL, endpoints: [`127.0.0.1:${upPort}`], policy: 'round_robin',
              // one endpoint holding S streams: neither the in-flight count nor the time to a first byte (the
              // generator opening S streams at once) is a saturation signal for a relay benchmark
              pool: { saturation: { queue_depth: 1_000_000, kv_cache: 1, max_prefill_backlog: '0s' } },
              nodeArgs: doProfile ? ['--cpu-prof', '--cpu-prof-dir', path.join(dir, `prof-${S}`)] : [],
            });
            const pid = gw.proc.child.pid!;
            pids = () => [pid];
            url = gw.url;
          }
          if (t !== 'direct') {
            await warmProxy(url);
            await sleep(300);
          }
          const e = await runCell(t, url, S, pids, upstreamPid, s, progress);
          entries.push(e);
          if (!e.whole && gw) {
            const said = gw.proc.output().trim().split('\n').slice(-5).join(' | ');
            if (said) notes.push(`infergate S=${S} said (last lines): ${said.slice(0, 1500)}`);
          }
          if (!e.whole && nginx) {
            let log = '';
            try { log = readFileSync(path.join(dir, `nginx-${S}`, 'error.log'), 'utf8'); } catch { /* none */ }
            const said = log.trim().split('\n').slice(-5).join(' | ');
            if (said) notes.push(`nginx S=${S} error.log (last lines): ${said.slice(0, 1500)}`);
          }
          progress.stepDone(summaryLine(e));
        } finally {
          if (gw) await gw.proc.stop();
          if (relay) await relay.stop();
          if (nginx) await nginx.stop();
        }
        if (doProfile && t === 'infergate' && entries.at(-1)?.name === 'infergate') {
          // the gateway writes its profile when it exits (SIGTERM above)
          const pdir = path.join(dir, `prof-${S}`);
          try {
            const f = readdirSync(pdir).find((n) => n.endsWith('.cpuprofile'));
            if (f) {
              entries.at(-1)!.profile = topFunctions(path.join(pdir, f), 15);
              mkdirSync(out, { recursive: true });
              copyFileSync(path.join(pdir, f), path.join(out, `infergate-streams-${S}.cpuprofile`));
            } else notes.push(`profile S=${S}: no .cpuprofile written`);
          } catch (err) {
            notes.push(`profile S=${S}: ${(err as Error).message}`);
          }
        }
      }
    }
    progress.finish();
  } finally {
    if (upstream) await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const ratios = ratiosOf(entries, steps);
  const verdict = streamsVerdict(entries);
  const valid = entries.every((e) => e.valid);
  for (const e of entries) {
    if (!e.whole) notes.push(`${e.name} S=${e.streams}: ${e.streams_broken} of ${e.streams_started} streams not whole: ${JSON.stringify(e.broken_reasons)}`);
    if (e.upstream_cpu_cores !== null && e.upstream_cpu_cores >= CLIENT_CPU_LIMIT) notes.push(`${e.name} S=${e.streams}: the upstream used ${e.upstream_cpu_cores} cores: it may have set the pace`);
  }
  const file = writeResult(out, 'streams.json', 'streams', {
    streams: steps, events, rate, duration_s: durationS, warmup_s: warmupS, ramp_s: rampS, targets, lag_bound_ms: lagBoundMs, open_file_limit: nofile,
    profile: doProfile,
    load_generator: 'this process: one undici Client (connection) per stream, dispatch handler, byte scan per chunk; closed loop',
    upstream: 'native-bench/upstream.ts paced: E events at R/s per stream, each stamped with its send time (CLOCK_MONOTONIC µs)',
    nginx: '1 worker, proxy_buffering off, upstream keepalive',
  }, { entries, ratios, targets: STREAM_TARGETS, verdict, valid, notes }, { nginx: nginxVersion });

  const lines = ['', 'target     S   events/s (offered)   CPU µs/event   RSS kB/stream   delay ms p50 / p99   whole        client cores / loop p99   valid'];
  for (const e of entries) {
    lines.push(`${e.name.padEnd(9)} ${String(e.streams).padStart(5)} ${String(e.events_per_s).padStart(10)} (${String(e.offered_events_per_s).padStart(7)}) ${String(e.cpu_us_per_event ?? '-').padStart(13)} ${String(e.rss_per_stream_kb ?? '-').padStart(15)} ${`${e.event_delay_ms.p50} / ${e.event_delay_ms.p99}`.padStart(20)}   ${`${e.streams_whole}/${e.streams_started}`.padEnd(12)} ${`${e.client.cpu_cores} / ${e.client.loop_delay_p99_ms} ms`.padStart(24)}   ${e.valid}`);
  }
  lines.push('', `verdict at S = ${VERDICT_STREAMS}: ${verdict.met === null ? 'not measured' : verdict.met ? 'met' : 'not met'}`);
  for (const i of verdict.items) lines.push(`  ${i.target}: ${i.value ?? '-'} (${i.limit}) ${i.met === null ? 'not measured' : i.met ? 'met' : 'NOT met'}${i.valid === false ? ' (run not valid)' : ''}`);
  for (const e of entries) {
    if (!e.profile) continue;
    lines.push('', `infergate S=${e.streams} CPU profile (whole cell, ${e.profile.total_ms} ms, idle ${e.profile.idle_pct}%; shares of busy time): by area ${JSON.stringify(e.profile.by_area)}`);
    for (const f of e.profile.top.slice(0, 12)) lines.push(`  ${String(f.self_pct).padStart(6)}%  ${f.function}  ${f.where}`);
  }
  for (const n of notes) lines.push(`note: ${n}`);
  console.log(lines.join('\n'));
  console.log(`\nwrote ${file}`);
}

function summaryLine(e: StreamsEntry): string {
  return `${e.name} S=${e.streams}: ${e.events_per_s} events/s of ${e.offered_events_per_s}, delay p50 ${e.event_delay_ms.p50} p99 ${e.event_delay_ms.p99} ms` +
    `${e.cpu_us_per_event !== null ? `, ${e.cpu_us_per_event} CPU µs/event` : ''}${e.rss_per_stream_kb !== null ? `, ${e.rss_per_stream_kb} kB/stream` : ''}` +
    `, ${e.streams_whole}/${e.streams_started} whole${e.valid ? '' : ' (INVALID)'}`;
}
