/** Drives test/quota/helpers/worker.mjs processes: one request line out, its answer line back, with a deadline. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';

const SCRIPT = join(import.meta.dirname, 'worker.mjs');

export interface Worker {
  child: ChildProcess;
  /** sends one op; rejects after `ms` without an answer (a hang is a failure, never a wait) */
  call<T = Record<string, unknown>>(op: Record<string, unknown>, ms?: number): Promise<T>;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

export async function startWorker(config: unknown): Promise<Worker> {
  const child = spawn(process.execPath, [SCRIPT, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const pending = new Map<number, (v: Record<string, unknown>) => void>();
  let next = 0;
  let ready!: () => void;
  let failed!: (e: Error) => void;
  const started = new Promise<void>((res, rej) => {
    ready = res;
    failed = rej;
  });
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  child.once('exit', (code) => failed(new Error(`worker exited (${code}): ${stderr.slice(-2000)}`)));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line === 'ready') return ready();
    const m = JSON.parse(line) as { id: number };
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  // a hang detector: a loaded machine can take seconds to start node and load the modules
  const timer = setTimeout(() => failed(new Error(`worker not ready after 60 s: ${stderr}`)), 60_000);
  try {
    await started;
  } catch (err) {
    child.kill('SIGKILL'); // never left behind holding the test process open
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const w: Worker = {
    child,
    call<T>(op: Record<string, unknown>, ms = 5_000): Promise<T> {
      const id = ++next;
      return new Promise<T>((res, rej) => {
        const t = setTimeout(() => {
          pending.delete(id);
          rej(new Error(`worker gave no answer to ${JSON.stringify(op)} within ${ms} ms`));
        }, ms);
        pending.set(id, (m) => {
          clearTimeout(t);
          if (typeof m.error === 'string') rej(new Error(m.error));
          else res(m as T);
        });
        child.stdin!.write(`${JSON.stringify({ ...op, id })}\n`);
      });
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    },
  };
  return w;
}
