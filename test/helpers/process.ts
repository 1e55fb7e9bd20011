/**
 * Real processes for tests: the built CLI (`node dist/cli.js …`), with a deadline on every wait.
 * `npm test` builds first (pretest), so dist/ is current.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const CLI = join(ROOT, 'dist', 'cli.js');

export interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout match of `re`, or rejects after `ms`. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  exited(ms?: number): Promise<number | null>;
  kill(sig?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `node dist/cli.js ARGS`; `spawnWith` starts it another way (it gets `[CLI, ...args]`, e.g. to run it
 * under `prlimit`), with stdout and stderr piped.
 */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, spawnWith?: (nodeArgs: string[]) => ChildProcess): Proc {
  const child = spawnWith
    ? spawnWith([CLI, ...args])
    : spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
  };
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    notify();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    notify();
  });
  let exitCode: number | null | undefined;
  const exit = new Promise<number | null>((res) => child.on('exit', (code, sig) => res((exitCode = code ?? (sig ? 128 : null)))));
  child.on('exit', notify);
  const proc: Proc = {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor(re, ms = 60_000) {
      return new Promise((resolveP, rejectP) => {
        const check = () => {
          const m = out.match(re);
          if (m) {
            cleanup();
            resolveP(m);
          } else if (exitCode !== undefined) {
            cleanup();
            rejectP(new Error(`process exited (${exitCode}) before ${re}; stderr: ${err.slice(-2000)}; stdout: ${out.slice(-1000)}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          rejectP(new Error(`timed out after ${ms} ms waiting for ${re}; stderr: ${err.slice(-2000)}; stdout: ${out.slice(-1000)}`));
        }, ms);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    exited(ms = 60_000) {
      return Promise.race([
        exit,
        new Promise<number | null>((_, rej) => setTimeout(() => rej(new Error(`process did not exit within ${ms} ms`)), ms).unref()),
      ]);
    },
    async kill(sig = 'SIGTERM') {
      if (exitCode !== undefined) return exitCode;
      child.kill(sig);
      try {
        return await proc.exited(10_000);
      } catch {
        child.kill('SIGKILL');
        return exit;
      }
    },
  };
  return proc;
}

/** A port nobody listens on right now (bound, then closed). */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => res(port));
    });
  });
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'infergate-test-'));
}

/** A gateway config with auth off and one pool; `over` replaces top-level keys, `pool` the pool's keys. */
export function gatewayConfig(endpoints: string[], opts: { pool?: Record<string, unknown>; over?: Record<string, unknown> } = {}) {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    debug_headers: true,
    auth: { mode: 'none', allow_unauthenticated: true },
    logging: { level: 'warn', access_log: false },
    models: [
      { name: 'test-model', pool: 'p' },
      { name: 'alias', targets: [{ model: 'test-model', weight: 1 }] },
    ],
    pools: {
      p: {
        endpoints,
        policy: 'round_robin',
        metrics: { interval: '100ms', stale_after: '1s' },
        ...opts.pool,
      },
    },
    ...opts.over,
  };
}

export interface RunningGateway {
  url: string;
  adminUrl: string;
  /** the config file it was started with (write it again to reload) */
  file: string;
  proc: Proc;
  stop(): Promise<number | null>;
}

/** Start `infergate serve` with this config object (port 0 = any free port) and wait until it listens. */
export async function startGateway(config: unknown, env: NodeJS.ProcessEnv = {}): Promise<RunningGateway> {
  const dir = tempDir();
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify(config));
  const proc = runCli(['serve', '--config', file], env);
  let url: string;
  let adminUrl: string;
  try {
    [, url] = await proc.waitFor(/^listening on (\S+)$/m);
    [, adminUrl] = await proc.waitFor(/^admin listening on (\S+)$/m);
  } catch (e) {
    await proc.kill(); // a gateway that never said it listens is not left running
    throw e;
  }
  return { url, adminUrl, file, proc, stop: () => proc.kill('SIGTERM') };
}

/**
 * Poll `check` until it returns a truthy value, or fail after `ms`; `explain` adds what the failure
 * message should carry besides (a process's last log lines), so that a failure in CI can be read.
 */
export async function until<T>(check: () => T | Promise<T>, ms = 5_000, what = 'condition', explain?: () => string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${explain ? `\n${explain()}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
