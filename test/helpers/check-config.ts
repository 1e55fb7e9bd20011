/** `infergate check-config` on a config written for the test: its exit code, stdout and stderr. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from './process.js';

export interface CheckResult {
  code: number | null;
  out: string;
  err: string;
}

/** Writes `text` as `dir/name` and checks it (waiting up to `ms` for the command to end). */
export async function checkConfigText(dir: string, name: string, text: string, ms?: number): Promise<CheckResult> {
  const f = join(dir, name);
  writeFileSync(f, text);
  const p = runCli(['check-config', f]);
  return { code: await p.exited(ms), out: p.stdout(), err: p.stderr() };
}
