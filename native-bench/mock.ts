/**
 * `mock`: how many streamed SSE events per second one `infergate mock --count K` process emits,
 * so that it is never the bottleneck of the other benchmarks. The mock runs as a real child process; C
 * closed-loop streaming chat-completion clients (undici, short prompts, `max_tokens` M) are spread over its
 * K servers and count `data:` events as they arrive ([DONE] excluded) for D seconds after a 1 s warm-up.
 * The mock's CPU time (utime + stime from /proc/PID/stat) is sampled at the start and end of the window.
 *
 * The load generator is this one Node process: on a 2-core machine it may be the limit, not the mock.
 * `events_per_cpu_s` (events per second of mock CPU) is the mock's own cost, whatever limited the run.
 */
import { setMaxListeners } from 'node:events';
import os from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { Pool } from 'undici';
import { INFERGATE_CLI, clockTicks, freePortRange, numOpt, procCpuTicks, round, sleep, startProcess, writeResult, type Proc } from './common.js';

export const MOCK_BENCH_MODEL = 'bench-model';
export const TARGET_EVENTS_PER_S = 50_000;
const WARMUP_MS = 1000;
/** A run stops early after this many failed requests (so a broken mock cannot spin the loop forever). */
const MAX_ERRORS = 1000;

/**
 * Counts SSE events fed in arbitrary chunks: `events` = `data:` events other than `data: [DONE]`,
 * `tokens` = those whose delta/text carries non-empty content (the first chat chunk, role only, is not a
 * token; neither is a usage-only chunk). Exported for tests.
 */
export class SseEventCounter {
  events = 0;
  tokens = 0;
  done = false;
  private partial = '';
  push(chunk: string): void {
    const s = this.partial.length ? this.partial + chunk : chunk;
    const end = s.lastIndexOf('\n\n');
    if (end < 0) {
      this.partial = s;
      return;
    }
    this.partial = s.slice(end + 2);
    let pos = 0;
    while (pos <= end) {
      const cut = s.indexOf('\n\n', pos);
      const evEnd = cut < 0 || cut > end ? end : cut;
      this.event(s, pos, evEnd);
      pos = evEnd + 2;
    }
  }
  /** One event: s[from, to). Only its `data:` lines count (comments, `event:` and `id:` lines do not). */
  private event(s: string, from: number, to: number): void {
    let line = from;
    while (line < to) {
      let nl = s.indexOf('\n', line);
      if (nl < 0 || nl > to) nl = to;
      if (s.startsWith('data:', line)) {
        const data = s.slice(line + 5, nl).trim();
        if (data === '[DONE]') this.done = true;
        else {
          this.events++;
          if (/"(?:content|text)":"(?:[^"\\]|\\.)/.test(data)) this.tokens++;
        }
        return; // one event, however many data lines it has
      }
      line = nl + 1;
    }
  }
}

/** utime + stime of a process in seconds, from /proc/PID/stat (null where /proc is not there). */
export function procCpuSeconds(pid: number, clkTck: number): number | null {
  const t = procCpuTicks(pid);
  return t ? (t.user + t.sys) / clkTck : null;
}

interface Counters {
  events: number;
  tokens: number;
  requests: number;
  errors: number;
  lastError: string | null;
}

export async function runMock(opts: Map<string, string>): Promise<void> {
  const count = numOpt(opts, 'count', 8);
  const connections = numOpt(opts, 'connections', 64);
  const durationS = numOpt(opts, 'duration', 5);
  const maxTokens = numOpt(opts, 'max-tokens', 256);
  const timeScale = numOpt(opts, 'time-scale', 20);
  const out = opts.get('out') ?? 'bench-out';
  for (const [k, v, min] of [['count', count, 1], ['connections', connections, 1], ['max-tokens', maxTokens, 1]] as const) {
    if (!Number.isInteger(v) || v < min) throw new Error(`--${k} must be an integer ≥ ${min}, not ${v}`);
  }
  if (!(durationS > 0) || !(timeScale > 0)) throw new Error('--duration and --time-scale must be > 0');

  const clkTck = clockTicks();
  const base = await freePortRange(count);
  const args = [INFERGATE_CLI, 'mock', '--port', String(base), '--count', String(count), '--model', MOCK_BENCH_MODEL, '--time-scale', String(timeScale), '--max-num-seqs', '256'];
  let proc: Proc | null = null;
  const pools: Pool[] = [];
  const stopAll = new AbortController();
  setMaxListeners(connections + 16, stopAll.signal); // one listener per in-flight request
  try {
    proc = await startProcess(process.execPath, args, { readyPattern: /mock listening on https?:\/\//, readyCount: count, name: 'infergate mock', timeoutMs: 30000 });
    const pid = proc.child.pid!;
    const endpoints = proc.ready.map((l) => /https?:\/\/([^/\s]+)/.exec(l)![1].replace('0.0.0.0', '127.0.0.1'));
    const perServer = Math.ceil(connections / endpoints.length);
    for (const e of endpoints) pools.push(new Pool(`http://${e}`, { connections: perServer, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000, keepAliveTimeout: 30_000 }));

    const c: Counters = { events: 0, tokens: 0, requests: 0, errors: 0, lastError: null };
    const client = async (i: number): Promise<void> => {
      const pool = pools[i % pools.length];
      const body = Buffer.from(JSON.stringify({ model: MOCK_BENCH_MODEL, messages: [{ role: 'user', content: `Say something, client ${i}.` }], max_tokens: maxTokens, stream: true }));
      // Bounded: ends at the deadline (abort) or after MAX_ERRORS failures in all.
      while (!stopAll.signal.aborted && c.errors < MAX_ERRORS) {
        const counter = new SseEventCounter();
        let seen = 0, seenTok = 0;
        try {
          const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, signal: stopAll.signal });
          if (res.statusCode !== 200) {
            let text = '';
            for await (const chunk of res.body) if (text.length < 300) text += chunk;
            throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
          }
          // undici's body yields Buffers even after setEncoding: decode here (a split UTF-8 sequence is kept for the next chunk)
          const dec = new StringDecoder('utf8');
          for await (const chunk of res.body) {
            counter.push(dec.write(chunk as Buffer));
            c.events += counter.events - seen;
            c.tokens += counter.tokens - seenTok;
            seen = counter.events;
            seenTok = counter.tokens;
          }
          if (!counter.done) throw new Error('stream ended without [DONE]');
          c.requests++;
        } catch (e) {
          if (stopAll.signal.aborted) return;
          c.errors++;
          c.lastError = (e as Error).message;
          await sleep(10);
        }
      }
    };

    const running = Array.from({ length: connections }, (_, i) => client(i));
    await sleep(WARMUP_MS);
    const snap = (): { t: number; cpu: number | null; client: NodeJS.CpuUsage; c: Counters } => ({ t: performance.now(), cpu: procCpuSeconds(pid, clkTck), client: process.cpuUsage(), c: { ...c } });
    const a = snap();
    await sleep(durationS * 1000);
    const b = snap();
    stopAll.abort();
    await Promise.allSettled(running);

    const wallS = (b.t - a.t) / 1000;
    const events = b.c.events - a.c.events;
    const mockCpuS = a.cpu !== null && b.cpu !== null ? b.cpu - a.cpu : null;
    const clientCpuS = (b.client.user - a.client.user + b.client.system - a.client.system) / 1e6;
    const clientCores = clientCpuS / wallS;
    const mockCores = mockCpuS !== null ? mockCpuS / wallS : null;
    const eventsPerS = events / wallS;
    const eventsPerCpuS = mockCpuS ? events / mockCpuS : null;
    const cpus = os.cpus().length;
    // One Node thread is busy at ~1 core; the mock idling below one core while the client is there means the client set the pace.
    const clientLimited = clientCores >= 0.85 && (mockCores === null || mockCores < 0.85);
    const mockBusy = mockCores !== null && mockCores >= 0.85;
    const load = os.loadavg()[0];
    const shared = load >= cpus; // other work held the cores: neither process could get a full one
    const note =
      `the load generator is one Node process (client CPU ${round(clientCores, 2)} cores of ${cpus}, mock ${mockCores !== null ? round(mockCores, 2) : '?'}); ` +
      (clientLimited
        ? 'the client was the limit (≈ one core busy while the mock was not), so events_per_s is a lower bound on what the mock can emit; events_per_cpu_s is the mock\'s capacity per core'
        : mockBusy
          ? 'the mock was busy (≈ one core), so events_per_s is near its ceiling; events_per_cpu_s is its cost per core'
          : shared
            ? `the machine was shared (load average ${round(load, 2)} on ${cpus} cores), so neither process got a full core: events_per_s is a lower bound; events_per_cpu_s is the mock's capacity per core`
            : 'neither process was busy: the simulated engine\'s pace (decode step / time-scale, tokens per step = running requests) set the rate; raise --time-scale and --connections to find the ceiling, or read events_per_cpu_s as the mock\'s capacity per core');
    const result = {
      count,
      connections,
      time_scale: timeScale,
      max_tokens: maxTokens,
      duration_s: round(wallS, 3),
      events: events,
      events_per_s: round(eventsPerS, 1),
      tokens_per_s: round((b.c.tokens - a.c.tokens) / wallS, 1),
      requests_per_s: round((b.c.requests - a.c.requests) / wallS, 2),
      errors: b.c.errors - a.c.errors,
      last_error: b.c.lastError,
      mock_cpu_s: mockCpuS !== null ? round(mockCpuS, 3) : null,
      mock_cpu_cores: mockCores !== null ? round(mockCores, 3) : null,
      events_per_cpu_s: eventsPerCpuS !== null ? round(eventsPerCpuS, 1) : null,
      client_cpu_cores: round(clientCores, 3),
      client_limited: clientLimited,
      limited_by: clientLimited ? 'client' : mockBusy ? 'mock' : shared ? 'shared_machine' : 'engine_pace',
      client_cpu_note: note,
      target: { events_per_s: TARGET_EVENTS_PER_S, met: eventsPerS >= TARGET_EVENTS_PER_S, met_per_mock_cpu_s: eventsPerCpuS !== null && eventsPerCpuS >= TARGET_EVENTS_PER_S },
    };
    const settings = { count, connections, duration_s: durationS, warmup_s: WARMUP_MS / 1000, max_tokens: maxTokens, time_scale: timeScale, model: MOCK_BENCH_MODEL, max_num_seqs: 256, clk_tck: clkTck, mock_args: args.slice(1) };
    const file = writeResult(out, 'mock.json', 'mock', settings, result);
    console.log(
      `mock: --count ${count}, ${connections} conns, max_tokens ${maxTokens}, x${timeScale}: ${Math.round(eventsPerS)} events/s, ${Math.round(result.tokens_per_s)} tokens/s, ${result.requests_per_s} req/s; ` +
        `mock CPU ${mockCores !== null ? round(mockCores, 2) : '?'} cores → ${eventsPerCpuS !== null ? Math.round(eventsPerCpuS) : '?'} events per mock-CPU-s; client CPU ${round(clientCores, 2)} cores${clientLimited ? ' (client-limited)' : mockBusy ? ' (mock busy)' : shared ? ` (shared machine, load ${round(load, 1)})` : ' (engine-paced)'}; ` +
        `errors ${result.errors}; target ≥ ${TARGET_EVENTS_PER_S} events/s: ${result.target.met ? 'met' : 'NOT met'}${!result.target.met && result.target.met_per_mock_cpu_s ? ' (met per mock-CPU-s)' : ''} → ${file}`,
    );
    if (result.errors > 0) console.error(`mock: ${result.errors} failed requests; last: ${result.last_error}`);
    if (events === 0) process.exitCode = 1;
  } finally {
    stopAll.abort();
    await Promise.allSettled(pools.map((p) => p.destroy()));
    if (proc) await proc.stop();
  }
}
