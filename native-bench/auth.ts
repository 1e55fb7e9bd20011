/**
 * `auth`: what JWT authentication costs. Over the wire, the same fast upstream (the `overhead` scenario's)
 * through three gateways started side by side: auth off, JWT with its cache of verified tokens (clients
 * reusing their tokens: the steady state), and JWT with `cache_entries: 0` (every request verified), each
 * driven by wrk sending `--tokens` distinct ES256 tokens in turn (so no two concurrent requests share one
 * verification), in interleaved rounds. In process, the cost of one verification per algorithm (distinct
 * tokens, no cache) and of one cached lookup.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { Authenticator } from '../src/auth/authenticator.js';
import { clockTicks, freePort, numOpt, procCpuTicks, round, startProcess, summarize, writeResult, type Proc } from './common.js';
import { startGateway, type Gateway } from './gateway.js';
import { requestBody } from './overhead.js';
import { UPSTREAM_MODEL } from './upstream.js';
import { runWrk } from './wrk.js';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cli.js');
const ISS = 'bench-issuer';
const AUD = 'infergate';
const TARGETS = ['off', 'jwt', 'jwt_uncached'] as const;
type Target = (typeof TARGETS)[number];

interface Signer {
  alg: string;
  kid: string;
  key: CryptoKey;
  jwk: Record<string, unknown>;
}

async function signer(alg: string): Promise<Signer> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, kid: `bench-${alg}`, key: privateKey, jwk: { ...(await exportJWK(publicKey)), kid: `bench-${alg}`, alg } };
}

function mint(s: Signer, sub: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ models: ['*'] }).setProtectedHeader({ alg: s.alg, kid: s.kid }).setSubject(sub).setIssuer(ISS).setAudience(AUD)
    .setIssuedAt(now).setExpirationTime(now + 3600).sign(s.key);
}

export async function runAuth(opts: Map<string, string>): Promise<void> {
  const out = opts.get('out') ?? 'bench-out';
  const connections = numOpt(opts, 'connections', 50);
  const durationS = numOpt(opts, 'duration', 5);
  const rounds = numOpt(opts, 'rounds', 3);
  const verifications = numOpt(opts, 'verifications', 2000);
  const tokenCount = numOpt(opts, 'tokens', 1000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'infergate-auth-bench-'));
  const notes: string[] = [];
  const signers: Signer[] = [];
  for (const alg of ['ES256', 'RS256', 'EdDSA']) {
    try {
      signers.push(await signer(alg));
    } catch (e) {
      notes.push(`${alg} skipped: ${(e as Error).message}`);
    }
  }
  const jwksFile = path.join(dir, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: signers.map((s) => s.jwk) }));
  const jwt = (cacheEntries: number) => ({
    mode: 'jwt',
    jwt: { jwks_file: jwksFile, issuer: ISS, audience: AUD, algorithms: signers.map((s) => s.alg), cache_entries: cacheEntries },
  });

  // ---- over the wire
  const clkTck = clockTicks();
  const entries: Array<{ target: Target; round: number; rps: number; latency_ms: { p50: number; p99: number }; non2xx: number; errors: number; cpu_us_per_request?: number }> = [];
  let upstream: Proc | null = null;
  const gws = new Map<Target, Gateway>();
  const es256 = signers.find((s) => s.alg === 'ES256')!;
  const token = await mint(es256, 'bench-tenant');
  const tokens = await Promise.all(Array.from({ length: tokenCount }, (_, i) => mint(es256, `tenant-${i}`)));
  try {
    const upPort = await freePort();
    upstream = await startProcess(process.execPath, [CLI, 'upstream', '--port', String(upPort)], { readyPattern: /^upstream listening/, name: 'upstream' });
    const base = { dir, model: UPSTREAM_MODEL, endpoints: [`127.0.0.1:${upPort}`], policy: 'round_robin', pool: { saturation: { queue_depth: 1_000_000, kv_cache: 1 } } };
    gws.set('off', await startGateway(base));
    gws.set('jwt', await startGateway({ ...base, auth: jwt(10_000) }));
    gws.set('jwt_uncached', await startGateway({ ...base, auth: jwt(0) }));
    const url = (t: Target) => `${gws.get(t)!.url}/v1/chat/completions`;
    // warm-up (JIT, connection pools, the token cache), not recorded
    for (const t of TARGETS) await runWrk({ url: url(t), body: requestBody('json'), connections: 10, durationS: 2, dir, tokens });
    for (let r = 1; r <= rounds; r++) {
      for (const t of TARGETS) {
        const pid = gws.get(t)!.proc.child.pid!;
        const before = procCpuTicks(pid);
        const w = await runWrk({ url: url(t), body: requestBody('json'), connections, durationS, dir, tokens });
        const after = procCpuTicks(pid);
        const e: (typeof entries)[number] = { target: t, round: r, rps: round(w.rps, 1), latency_ms: { p50: round(w.latency_ms.p50), p99: round(w.latency_ms.p99) }, non2xx: w.non2xx, errors: w.errors };
        if (before && after && w.requests > 0) e.cpu_us_per_request = round(((after.user + after.sys - before.user - before.sys) * 1e6) / clkTck / w.requests, 1);
        entries.push(e);
        if (w.non2xx > 0) notes.push(`${t} round ${r}: ${w.non2xx} of ${w.requests} answers were not 2xx`);
        process.stderr.write(`auth ${t} round ${r}: ${e.rps} req/s p50 ${e.latency_ms.p50} ms p99 ${e.latency_ms.p99} ms${e.cpu_us_per_request !== undefined ? `, gateway CPU ${e.cpu_us_per_request} µs/req` : ''}\n`);
      }
    }
  } finally {
    for (const g of gws.values()) await g.proc.stop();
    if (upstream) await upstream.stop();
  }
  const median = (xs: number[]) => summarize(xs).p50;
  const summary = Object.fromEntries(TARGETS.map((t) => {
    const es = entries.filter((e) => e.target === t);
    return [t, {
      rps_median: round(median(es.map((e) => e.rps)), 1),
      p50_ms_median: round(median(es.map((e) => e.latency_ms.p50))),
      p99_ms_median: round(median(es.map((e) => e.latency_ms.p99))),
      cpu_us_per_request_median: es.every((e) => e.cpu_us_per_request !== undefined) ? round(median(es.map((e) => e.cpu_us_per_request!)), 1) : null,
    }];
  })) as Record<Target, { rps_median: number; p50_ms_median: number; p99_ms_median: number; cpu_us_per_request_median: number | null }>;
  // per round (the three targets ran back to back), then the median: less exposed to load that drifts
  const perRound = (t: Target) => Array.from({ length: rounds }, (_, i) => {
    const a = entries.find((e) => e.target === t && e.round === i + 1);
    const b = entries.find((e) => e.target === 'off' && e.round === i + 1);
    return a && b ? a.rps / b.rps : NaN;
  }).filter(Number.isFinite);
  const ratios = {
    jwt_vs_off: round(median(perRound('jwt'))),
    jwt_uncached_vs_off: round(median(perRound('jwt_uncached'))),
    cpu_us_added_jwt: summary.jwt.cpu_us_per_request_median !== null && summary.off.cpu_us_per_request_median !== null ? round(summary.jwt.cpu_us_per_request_median - summary.off.cpu_us_per_request_median, 1) : null,
    cpu_us_added_jwt_uncached: summary.jwt_uncached.cpu_us_per_request_median !== null && summary.off.cpu_us_per_request_median !== null ? round(summary.jwt_uncached.cpu_us_per_request_median - summary.off.cpu_us_per_request_median, 1) : null,
  };

  // ---- in process: one verification per algorithm, and one cached lookup
  // CPU time (process.cpuUsage) beside wall time: on a loaded machine the wall clock counts the time other
  // processes held the CPU, the CPU time does not
  const cpuUs = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const verify: Record<string, { cpu_us_mean: number; wall_us_p50: number; wall_us_p99: number; n: number }> = {};
  const log = { warn: () => undefined, info: () => undefined };
  for (const s of signers) {
    const auth = await Authenticator.create({ ...jwt(0).jwt, jwks_refresh: 0, jwks_cooldown: 0, jwks_timeout: 0, clock_skew: 30_000, tenant_claim: 'sub', models_claim: 'models', priority_claim: 'priority' }, log);
    const tokens = await Promise.all(Array.from({ length: verifications + 200 }, (_, i) => mint(s, `t${i}`)));
    for (const tk of tokens.slice(0, 200)) await auth.authenticate(`Bearer ${tk}`); // warm-up
    const times: number[] = [];
    const cpu0 = cpuUs();
    for (const tk of tokens.slice(200)) {
      const t0 = performance.now();
      const r = await auth.authenticate(`Bearer ${tk}`);
      times.push((performance.now() - t0) * 1000);
      if ('code' in r) throw new Error(`bench token refused: ${r.message}`);
    }
    const cpu = (cpuUs() - cpu0) / times.length;
    const sm = summarize(times);
    verify[s.alg] = { cpu_us_mean: round(cpu, 1), wall_us_p50: round(sm.p50, 1), wall_us_p99: round(sm.p99, 1), n: times.length };
    auth.close();
  }
  const cachedAuth = await Authenticator.create({ ...jwt(10_000).jwt, jwks_refresh: 0, jwks_cooldown: 0, jwks_timeout: 0, clock_skew: 30_000, tenant_claim: 'sub', models_claim: 'models', priority_claim: 'priority' }, log);
  await cachedAuth.authenticate(`Bearer ${token}`);
  const header = `Bearer ${token}`;
  const lookups = 200_000;
  for (let i = 0; i < 20_000; i++) cachedAuth.authenticate(header);
  const t0 = performance.now();
  const c0 = cpuUs();
  for (let i = 0; i < lookups; i++) {
    if (cachedAuth.authenticate(header) instanceof Promise) throw new Error('a cached token was verified again');
  }
  const cachedCpuNs = round(((cpuUs() - c0) * 1e3) / lookups, 0);
  const cachedNs = round(((performance.now() - t0) * 1e6) / lookups, 0);
  cachedAuth.close();

  const file = writeResult(out, 'auth.json', 'auth', { connections, duration_s: durationS, rounds, verifications, tokens: tokenCount, body: 'the overhead scenario\'s small JSON chat completion', load_generator: 'wrk 4.1, 1 thread, Lua request() POSTing with the next of the tokens' }, {
    entries, summary, ratios, verify, cached_lookup: { cpu_ns: cachedCpuNs, wall_ns: cachedNs }, load_average: os.loadavg(), notes,
  });
  console.log('target         req/s (median)  p50 ms  p99 ms  gateway CPU µs/req');
  for (const t of TARGETS) {
    const s = summary[t];
    console.log(`${t.padEnd(14)} ${String(s.rps_median).padStart(14)}  ${String(s.p50_ms_median).padStart(6)}  ${String(s.p99_ms_median).padStart(6)}  ${String(s.cpu_us_per_request_median ?? '-').padStart(18)}`);
  }
  console.log(`req/s vs off (median of per-round ratios): jwt ${ratios.jwt_vs_off}, jwt_uncached ${ratios.jwt_uncached_vs_off}; gateway CPU added per request: jwt ${ratios.cpu_us_added_jwt} µs, jwt_uncached ${ratios.cpu_us_added_jwt_uncached} µs`);
  for (const [alg, v] of Object.entries(verify)) console.log(`verify ${alg}: ${v.cpu_us_mean} µs CPU each (wall p50 ${v.wall_us_p50} µs, p99 ${v.wall_us_p99} µs; ${v.n} distinct tokens)`);
  console.log(`cached lookup (sha256 + LRU get): ${cachedCpuNs} ns CPU (wall ${cachedNs} ns)`);
  console.log(`load average at the end: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`wrote ${file}`);
}
