/**
 * `quota`: what tenant-quota admission costs a request. In memory: Quota.admit + lease.release per
 * request (one tenant with every limit, never refused). On Redis (a redis-server started here on a free
 * port, installed with apt-get when missing): the latency of one admission at a time (p50/p99), and
 * admissions per second with many in flight (ioredis pipelines them on one connection).
 */
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { Quota } from '../src/quota/index.js';
import type { QuotaConfig, TenantsConfig } from '../src/config/schema.js';
import { ensureTool, freePort, numOpt, percentileSorted, round, sleep, stopOnExit, writeResult } from './common.js';

const TENANTS: TenantsConfig = {
  default: { requests_per_minute: 1e12, tokens_per_minute: 1e15, max_concurrent: 1e9 },
  overrides: {},
};

function quotaConfig(backend: 'memory' | 'redis', url?: string): QuotaConfig {
  return { backend, redis: { url, key_prefix: 'bench:', timeout: 1000, lease_ttl: 30_000 }, on_backend_error: 'deny' };
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => done(d.toString().startsWith('+PONG')));
    s.on('error', () => done(false));
  });
}

async function memoryRun(ops: number): Promise<Record<string, number>> {
  const q = new Quota(TENANTS, quotaConfig('memory'));
  // warm-up, then the measured run
  for (let i = 0; i < 20_000; i++) (await q.admit(`t${i & 63}`, 500)).lease.release();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) {
    const d = await q.admit(`t${i & 63}`, 500);
    d.lease.reconcile(480, 200);
    d.lease.release();
  }
  const ns = Number(process.hrtime.bigint() - t0) / ops;
  return { ops, ns_per_request: round(ns, 1) };
}

async function redisRun(url: string, sequential: number, concurrency: number, seconds: number): Promise<Record<string, unknown>> {
  let up = false;
  const q = new Quota(TENANTS, quotaConfig('redis', url), { onBackendUp: (u) => (up = u) });
  for (let i = 0; i < 100 && !up; i++) await sleep(50);
  if (!up) throw new Error('could not connect to the redis-server started for the benchmark');
  for (let i = 0; i < 500; i++) (await q.admit('warm', 500)).lease.release();
  const lat: number[] = [];
  for (let i = 0; i < sequential; i++) {
    const t0 = process.hrtime.bigint();
    const d = await q.admit(`t${i & 63}`, 500);
    lat.push(Number(process.hrtime.bigint() - t0) / 1000);
    if (d.source !== 'redis') throw new Error(`admission answered from ${d.source}, not Redis`);
    d.lease.release();
  }
  lat.sort((a, b) => a - b);
  let done = 0;
  const until = Date.now() + seconds * 1000;
  const loop = async (k: number) => {
    while (Date.now() < until) {
      const d = await q.admit(`t${k & 63}`, 500);
      d.lease.reconcile(480, 200);
      d.lease.release();
      done++;
    }
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: concurrency }, (_, k) => loop(k)));
  const elapsed = (Date.now() - t0) / 1000;
  await q.close();
  return {
    sequential: { admissions: sequential, p50_us: round(percentileSorted(lat, 0.5), 1), p99_us: round(percentileSorted(lat, 0.99), 1) },
    concurrent: { in_flight: concurrency, seconds: round(elapsed, 2), admissions_per_s: Math.round(done / elapsed) },
  };
}

export async function runQuota(opts: Map<string, string>): Promise<void> {
  const ops = numOpt(opts, 'ops', 200_000);
  const sequential = numOpt(opts, 'sequential', 5_000);
  const concurrency = numOpt(opts, 'concurrency', 64);
  const seconds = numOpt(opts, 'duration', 3);
  const out = opts.get('out') ?? 'bench-out';

  const memory = await memoryRun(ops);
  console.log(`memory: ${memory.ns_per_request} ns per request (admit + reconcile + release)`);

  const bin = ensureTool('redis-server');
  const port = await freePort();
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  stopOnExit(child);
  let redis: Record<string, unknown>;
  try {
    for (let i = 0; i < 100 && !(await ping(port)); i++) await sleep(50);
    redis = await redisRun(`redis://127.0.0.1:${port}`, sequential, concurrency, seconds);
  } finally {
    child.kill('SIGKILL');
  }
  const seq = redis.sequential as Record<string, number>;
  const conc = redis.concurrent as Record<string, number>;
  console.log(`redis: one at a time p50 ${seq.p50_us} µs, p99 ${seq.p99_us} µs; ${conc.in_flight} in flight: ${conc.admissions_per_s} admissions/s`);
  const file = writeResult(out, 'quota.json', 'quota', { ops, sequential, concurrency, duration_s: seconds }, { memory, redis });
  console.log(`wrote ${file}`);
}
