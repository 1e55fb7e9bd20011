/**
 * nginx as the reference proxy: Debian's nginx (installed with apt-get if missing), one worker (or
 * `sizing.workers`),
 * upstream keepalive, proxy buffering off, `daemon off;`, started as `nginx -c CONF -p DIR -e LOG`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { ensureTool, sleep, stopOnExit } from './common.js';

/** For many long-lived connections (`streams`): the worker's connection and open-file limits, and how many idle upstream connections it keeps. */
export interface NginxSizing {
  workerConnections: number;
  upstreamKeepalive: number;
  /** worker_processes (default 1; `overhead --workers N` sets it to compare with `serve --workers N`) */
  workers?: number;
}
export const DEFAULT_SIZING: NginxSizing = { workerConnections: 8192, upstreamKeepalive: 128 };

export function nginxConfig(dir: string, listenPort: number, upstreamPort: number, sizing: NginxSizing = DEFAULT_SIZING): string {
  const t = (n: string): string => path.join(dir, n);
  return `worker_processes ${sizing.workers ?? 1};
worker_rlimit_nofile ${sizing.workerConnections + 64};
daemon off;
pid ${t('nginx.pid')};
error_log ${t('error.log')} warn;
events { worker_connections ${sizing.workerConnections}; }
http {
  access_log off;
  client_body_temp_path ${t('client_body')};
  proxy_temp_path ${t('proxy_temp')};
  fastcgi_temp_path ${t('fastcgi_temp')};
  uwsgi_temp_path ${t('uwsgi_temp')};
  scgi_temp_path ${t('scgi_temp')};
  keepalive_requests 1000000;
  upstream llm {
    server 127.0.0.1:${upstreamPort};
    keepalive ${sizing.upstreamKeepalive};
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${listenPort} backlog=4096;
    location / {
      proxy_pass http://llm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

export async function waitForPort(port: number, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child && child.exitCode !== null) throw new Error(`process exited (${child.exitCode}) before listening on ${port}`);
    if (await canConnect(port)) return;
    await sleep(50);
  }
  throw new Error(`nothing listening on ${port} after ${timeoutMs} ms`);
}

export interface Nginx { port: number; version: string; pid: number; stop: () => Promise<void> }

export async function startNginx(dir: string, listenPort: number, upstreamPort: number, sizing?: NginxSizing): Promise<Nginx> {
  const bin = ensureTool('nginx');
  mkdirSync(dir, { recursive: true });
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, listenPort, upstreamPort, sizing));
  const log = path.join(dir, 'error.log');
  const v = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  const version = (v.stderr || v.stdout).trim().replace(/^nginx version:\s*/, '');
  const child = spawn(bin, ['-c', conf, '-p', dir, '-e', log], { stdio: ['ignore', 'ignore', 'pipe'] });
  stopOnExit(child);
  let err = '';
  child.stderr!.on('data', (b) => { err += b; });
  try {
    await waitForPort(listenPort, 10000, child);
  } catch (e) {
    child.kill('SIGKILL');
    let logText = '';
    try { logText = readFileSync(log, 'utf8'); } catch { /* none */ }
    throw new Error(`nginx did not start: ${(e as Error).message}\n${err}\n${logText.slice(-2000)}`);
  }
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGQUIT');
    const t = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(t);
  };
  return { port: listenPort, version, pid: child.pid ?? 0, stop };
}
