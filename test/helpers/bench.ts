/** Runs the compiled benchmarks (`npm test`'s pretest compiles them into dist-bench/) as a user would. */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT } from './process.js';

export const BENCH_CLI = path.join(ROOT, 'dist-bench', 'native-bench', 'cli.js');

export function runBench(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BENCH_CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out, err });
    });
  });
}
