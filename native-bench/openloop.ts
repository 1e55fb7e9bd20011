/**
 * A fixed-rate open-loop HTTP client (undici): request i is sent at i/rate seconds whatever happened to
 * the earlier ones, as wrk2 would. Latency is measured from the scheduled time (so a slow system is not
 * hidden by a client that waits: no coordinated omission) and from the actual send; the client's own lag
 * is recorded and checked with lag.ts. The first `warmupS` seconds (default 1) run at the same rate but are
 * not recorded: they open the connections (client → proxy → upstream), which otherwise made the p99.
 */
import { Pool } from 'undici';
import { round, summarize, type Summary } from './common.js';
import { checkLag, runSchedule, type LagReport } from './lag.js';

export interface OpenLoopResult {
  target_rps: number;
  achieved_rps: number;
  sent: number;
  completed: number;
  errors: number;
  latency_ms: Summary;
  latency_from_send_ms: Summary;
  lag: LagReport;
}

export async function openLoop(opts: { origin: string; path: string; body: string; rate: number; durationS: number; warmupS?: number; connections?: number; lagBoundMs?: number }): Promise<OpenLoopResult> {
  const warm = Math.max(0, Math.floor(opts.rate * (opts.warmupS ?? 1)));
  const n = warm + Math.max(1, Math.floor(opts.rate * opts.durationS));
  const schedule = new Float64Array(n);
  for (let i = 0; i < n; i++) schedule[i] = (i * 1000) / opts.rate;
  const pool = new Pool(opts.origin, { connections: opts.connections ?? 256, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 });
  const body = Buffer.from(opts.body);
  const lat: number[] = [];
  const latSend: number[] = [];
  let errors = 0;
  let completed = 0;
  let pending = 0;
  let t0 = 0;
  let lastDone = 0;
  let resolveDrain: (() => void) | null = null;
  const started = performance.now();
  const { lags, unsent } = await runSchedule({
    scheduleMs: schedule,
    deadlineMs: (opts.durationS + (opts.warmupS ?? 1)) * 1000 + 5000,
    send: (i) => {
      if (t0 === 0) t0 = performance.now() - schedule[i];
      const sentAt = performance.now();
      pending++;
      pool
        .request({ path: opts.path, method: 'POST', body, headers: { 'content-type': 'application/json' } })
        .then(async (res) => {
          for await (const _ of res.body) { /* drain */ }
          const end = performance.now();
          if (i < warm) return; // warm-up: not recorded
          if (res.statusCode !== 200) errors++;
          else {
            completed++;
            lat.push(end - (started + schedule[i]));
            latSend.push(end - sentAt);
          }
          lastDone = end;
        })
        .catch(() => { if (i >= warm) errors++; })
        .finally(() => {
          pending--;
          if (pending === 0 && resolveDrain) resolveDrain();
        });
    },
  });
  if (pending > 0) {
    await Promise.race([new Promise<void>((r) => { resolveDrain = r; }), new Promise((r) => setTimeout(r, 30_000))]);
  }
  await pool.close().catch(() => undefined);
  const elapsed = Math.max(1, lastDone - (started + (warm * 1000) / opts.rate));
  return {
    target_rps: round(opts.rate, 1),
    achieved_rps: round((completed * 1000) / elapsed, 1),
    sent: Math.max(0, n - warm - unsent),
    completed,
    errors,
    latency_ms: summarize(lat),
    latency_from_send_ms: summarize(latSend),
    lag: checkLag(lags, opts.lagBoundMs),
  };
}
