/**
 * Shared helpers for the benchmark scenarios: percentiles, JSON conventions (every result file carries
 * `scenario`, `created`, `machine`, `versions`, `settings`), free ports, child processes that announce
 * readiness with a line, and apt-installed tools.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (dist-bench/native-bench/common.js → ../..). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The compiled infergate CLI inside dist-bench (tsconfig.bench.json compiles src/ beside native-bench/). */
export const INFERGATE_CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'cli.js');

export type { Summary } from '../src/sim/types.js';
import type { Summary } from '../src/sim/types.js';

/** Nearest-rank percentile of an ascending-sorted array (q in [0, 1]); 0 for an empty array. */
export function percentileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return 0;
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  return sorted[rank];
}

export function summarize(values: number[]): Summary {
  if (values.length === 0) return { p50: 0, p90: 0, p99: 0, mean: 0 };
  const s = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    p50: round(percentileSorted(s, 0.5)),
    p90: round(percentileSorted(s, 0.9)),
    p99: round(percentileSorted(s, 0.99)),
    mean: round(sum / s.length),
  };
}

export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return 0;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    hostname: os.hostname(),
    platform: `${os.platform()} ${os.release()}`,
    arch: os.arch(),
    cpus: cpus.length,
    cpu_model: cpus[0]?.model ?? 'unknown',
    total_mem_gb: round(os.totalmem() / 2 ** 30, 1),
    loadavg_1m: round(os.loadavg()[0], 2),
  };
}

export function versions(extra: Record<string, string | null> = {}): Record<string, string | null> {
  let infergate: string | null = null;
  try {
    infergate = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')).version ?? null;
  } catch {
    /* not in a checkout */
  }
  let commit: string | null = null;
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' });
  if (git.status === 0) commit = git.stdout.trim();
  return { node: process.version, infergate, commit, ...extra };
}

/** Writes `dir/name` as pretty JSON with the common envelope fields first; returns the path. */
export function writeResult(dir: string, name: string, scenario: string, settings: Record<string, unknown>, body: Record<string, unknown>, extraVersions: Record<string, string | null> = {}): string {
  mkdirSync(dir, { recursive: true });
  const out = {
    scenario,
    created: new Date().toISOString(),
    machine: machineInfo(),
    versions: versions(extraVersions),
    settings,
    ...body,
  };
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  return file;
}

/** A free TCP port on 127.0.0.1 (bound then released; a tiny race with other processes is accepted). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A base port such that base..base+count-1 are all free (for `mock --port N --count K`). */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    // below Linux's ephemeral range (32768+), where outgoing connections take their local ports
    const base = 20000 + Math.floor(Math.random() * (32000 - 20000 - count));
    let ok = true;
    for (let i = 0; i < count && ok; i++) ok = await portIsFree(base + i);
    if (ok) return base;
  }
  throw new Error(`no free range of ${count} ports found`);
}

export interface Proc {
  child: ChildProcess;
  /** The lines matched by the readiness pattern, in order (e.g. one URL per mock server). */
  ready: string[];
  /** Everything it printed so far (bounded), for error messages. */
  output: () => string;
  stop: () => Promise<void>;
}

/**
 * Spawns `cmd args` and waits until `readyCount` lines of its output match `readyPattern` (or it exits,
 * or `timeoutMs` passes: both reject with its last output).
 */
/** Processes a benchmark started and that still run: sent SIGTERM if the benchmark itself exits first. */
const running = new Set<ChildProcess>();
let exitHooked = false;

/**
 * Stop `child` when this process exits, whatever the reason (an exception, a closed stdout), so a
 * benchmark that dies leaves no gateway, upstream or nginx behind. SIGTERM: each drains or quits on it.
 */
export function stopOnExit(child: ChildProcess): void {
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', () => {
      for (const c of running) {
        try {
          c.kill('SIGTERM');
        } catch {
          // already gone
        }
      }
    });
  }
  running.add(child);
  child.once('exit', () => running.delete(child));
}

export function startProcess(cmd: string, args: string[], opts: { readyPattern: RegExp; readyCount?: number; timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string; name?: string }): Promise<Proc> {
  const readyCount = opts.readyCount ?? 1;
  const timeoutMs = opts.timeoutMs ?? 20000;
  const name = opts.name ?? path.basename(cmd);
  const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  stopOnExit(child);
  let out = '';
  const ready: string[] = [];
  let exited = false;
  const exitPromise = new Promise<void>((r) => child.once('exit', () => { exited = true; r(); }));
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => { if (!exited) child.kill('SIGKILL'); }, 3000);
    await exitPromise;
    clearTimeout(t);
  };
  return new Promise<Proc>((resolve, reject) => {
    let done = false;
    let partial = '';
    const timer = setTimeout(() => finish(new Error(`${name} not ready after ${timeoutMs} ms; output:\n${out.slice(-3000)}`)), timeoutMs);
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        void stop();
        reject(err);
      } else {
        resolve({ child, ready, output: () => out, stop });
      }
    };
    const onData = (buf: Buffer): void => {
      const s = buf.toString();
      if (out.length < 200_000) out += s;
      if (done) return;
      partial += s;
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (opts.readyPattern.test(line)) {
          ready.push(line.trim());
          if (ready.length >= readyCount) return finish();
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (e) => finish(new Error(`${name} failed to start: ${e.message}`)));
    child.once('exit', (code, sig) => finish(new Error(`${name} exited (${code ?? sig}) before ready; output:\n${out.slice(-3000)}`)));
  });
}

export function which(bin: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : null;
}

/** Finds `bin` on PATH, else installs the Debian package with apt-get (root) and looks again. */
export function ensureTool(bin: string, pkg = bin): string {
  const found = which(bin) ?? (['/usr/sbin/', '/usr/bin/'].map((d) => d + bin).find((p) => spawnSync('test', ['-x', p]).status === 0) ?? null);
  if (found) return found;
  process.stderr.write(`${bin} not found: installing Debian package ${pkg} (apt-get update && apt-get install -y ${pkg})\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const up = spawnSync('apt-get', ['update'], { stdio: 'inherit', env, timeout: 300_000 });
  const inst = spawnSync('apt-get', ['install', '-y', pkg], { stdio: 'inherit', env, timeout: 300_000 });
  const again = which(bin) ?? (['/usr/sbin/', '/usr/bin/'].map((d) => d + bin).find((p) => spawnSync('test', ['-x', p]).status === 0) ?? null);
  if (!again) throw new Error(`could not install ${pkg} (apt-get update: ${up.status}, install: ${inst.status}); install it and retry`);
  return again;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function numOpt(opts: Map<string, string>, key: string, def: number): number {
  const v = opts.get(key);
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`--${key} must be a number, not ${JSON.stringify(v)}`);
  return n;
}

/** User and system CPU of a process so far, in clock ticks (/proc/PID/stat), or null (no /proc, or gone). */
export function procCpuTicks(pid: number): { user: number; sys: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after "(comm) ": state is field 3, utime 14, stime 15 → indices 11 and 12 here
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { user: Number(f[11]), sys: Number(f[12]) };
  } catch {
    return null;
  }
}

/** The kernel's clock ticks per second (getconf CLK_TCK; 100 if that fails). */
export function clockTicks(): number {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return r.status === 0 && Number.isInteger(n) && n > 0 ? n : 100;
}

/**
 * Progress of a long benchmark on stderr, only when stderr is a terminal (a log file or CI stays quiet):
 * what is running, how far (`[k/N]`), and an estimate of the time left from the pace so far. `line()`
 * rewrites the current line (live counters inside one step); `step()` starts the next step.
 */
export class Progress {
  private done = 0;
  private readonly t0 = performance.now();
  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly tty: boolean = process.stderr.isTTY === true,
    private readonly write: (s: string) => void = (s) => void process.stderr.write(s),
  ) {}
  /** the estimate of what is left, from the average step so far ('' before the first step ends) */
  private left(): string {
    if (this.done === 0 || this.done >= this.total) return '';
    const per = (performance.now() - this.t0) / 1000 / this.done;
    return `, about ${Math.ceil(per * (this.total - this.done))} s left`;
  }
  /** Step k of N begins: `what` it is. */
  step(what: string): void {
    if (!this.tty) return;
    this.write(`\r\x1b[K${this.label} [${Math.min(this.done + 1, this.total)}/${this.total}] ${what}${this.left()}`);
  }
  /** A live detail for the running step (rewrites the line). */
  line(detail: string): void {
    if (!this.tty) return;
    this.write(`\r\x1b[K${this.label} [${Math.min(this.done + 1, this.total)}/${this.total}] ${detail}${this.left()}`);
  }
  /** The running step ended; `result` (if any) stays on its own line. */
  stepDone(result?: string): void {
    this.done++;
    if (!this.tty) return;
    this.write(`\r\x1b[K${result ? `${this.label}: ${result}\n` : ''}`);
  }
  /** All done: the total time, on its own line. */
  finish(): void {
    if (!this.tty) return;
    this.write(`\r\x1b[K${this.label}: done in ${((performance.now() - this.t0) / 1000).toFixed(1)} s\n`);
  }
}
