/**
 * A real redis-server for a test, on a free port, with no persistence; waits (with a deadline) until it
 * answers PING. `.ci/run` installs the Debian package when it is missing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { freePort } from './process.js';

export interface RunningRedis {
  port: number;
  url: string;
  /** SIGKILL: gone at once, as a crashed server */
  kill(): Promise<void>;
  /** a new server on the same port (after kill) */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: the server hangs without closing its connections */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export function redisInstalled(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** One PING over a fresh connection: true on +PONG within `ms`. */
export function ping(port: number, ms = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let got = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), ms);
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      got += d.toString();
      if (got.includes('\r\n')) done(got.startsWith('+PONG'));
    });
    sock.on('error', () => done(false));
  });
}

async function waitForPing(port: number, child: ChildProcess, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}) before answering PING`);
    if (await ping(port)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${ms} ms`);
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

export async function startRedis(): Promise<RunningRedis> {
  if (!redisInstalled()) throw new Error('redis-server is not installed (apt-get install -y redis-server; .ci/run does it)');
  const port = await freePort();
  let child: ChildProcess;
  const launch = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    await waitForPing(port, child);
  };
  await launch();
  const r: RunningRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async kill() {
      child.kill('SIGKILL');
      await exited(child);
    },
    restart: launch,
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited(child);
    },
  };
  return r;
}
