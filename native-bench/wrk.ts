/** Runs wrk (Debian's wrk 4.1; installed with apt-get if missing) with a Lua script that POSTs a body. */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureTool } from './common.js';

export interface WrkResult {
  rps: number;
  latency_ms: { p50: number; p99: number };
  requests: number;
  errors: number;
  non2xx: number;
}

/** A wrk Lua script that POSTs `body` as JSON (with `headers` besides). */
export function wrkScript(body: string, headers: Record<string, string> = {}): string {
  const lua = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  let script = `wrk.method = "POST"\nwrk.body = "${lua(body)}"\nwrk.headers["Content-Type"] = "application/json"\n`;
  for (const [k, v] of Object.entries(headers)) script += `wrk.headers["${lua(k)}"] = "${lua(v)}"\n`;
  return script;
}

/**
 * A wrk Lua script that POSTs `body` with `Authorization: Bearer <token>`, the tokens taken in turn (each
 * request of a connection the next one), so that a gateway sees many clients' tokens, not one.
 */
export function wrkTokenScript(body: string, tokens: readonly string[]): string {
  const lua = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  return `local tokens = {${tokens.map((t) => `"${lua(t)}"`).join(',')}}
local body = "${lua(body)}"
local i = math.random(#tokens)
request = function()
  i = i % #tokens + 1
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[i] }, body)
end
`;
}

/** Parses wrk's `--latency` output. Exported for tests. */
export function parseWrk(out: string): WrkResult {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN);
  const unit = (v: string, u: string): number => (u === 'us' ? Number(v) / 1000 : Number(v) * (u === 's' ? 1000 : u === 'm' ? 60000 : 1));
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return m ? unit(m[1], m[2]) : NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0;
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  if (!Number.isFinite(rps)) throw new Error(`could not parse wrk output:\n${out}`);
  return { rps, latency_ms: { p50: pct('50'), p99: pct('99') }, requests, errors, non2xx };
}

export async function runWrk(opts: { url: string; body: string; connections: number; durationS: number; threads?: number; dir: string; headers?: Record<string, string>; tokens?: readonly string[] }): Promise<WrkResult> {
  const wrk = ensureTool('wrk');
  const script = path.join(opts.dir, `wrk-${process.pid}.lua`);
  writeFileSync(script, opts.tokens ? wrkTokenScript(opts.body, opts.tokens) : wrkScript(opts.body, opts.headers));
  const threads = Math.max(1, Math.min(opts.threads ?? 1, opts.connections));
  const args = ['-t', String(threads), '-c', String(opts.connections), '-d', `${opts.durationS}s`, '--timeout', '10s', '--latency', '-s', script, opts.url];
  return new Promise((resolve, reject) => {
    const child = spawn(wrk, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { out += b; });
    const killer = setTimeout(() => child.kill('SIGKILL'), (opts.durationS + 30) * 1000);
    child.on('error', (e) => { clearTimeout(killer); reject(e); });
    child.on('exit', (code) => {
      clearTimeout(killer);
      if (code !== 0) return reject(new Error(`wrk exited ${code}:\n${out}`));
      try { resolve(parseWrk(out)); } catch (e) { reject(e); }
    });
  });
}
