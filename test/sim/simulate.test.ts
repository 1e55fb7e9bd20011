// The simulator's contract: deterministic to the byte, every request accounted for, the oracle on top.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { generateWorkload, loadTrace, runSimulation, simulateMain, checkTargets, type SimRequest } from '../../src/sim/index.js';
import { headlineOf } from '../../src/sim/slo.js';

const TRACE = resolve(import.meta.dirname, '../../../shared/traces/mooncake_synthetic_trace.jsonl');
const hasTrace = existsSync(TRACE);

t.test('byte-identical JSON for the same inputs and seed (API and CLI)', async (t) => {
  const reqs = generateWorkload('shared-prefix', { seed: 5, requests: 150 });
  const a = JSON.stringify(runSimulation({ requests: reqs, trace: 'shared-prefix', rateScale: 3, seed: 5 }));
  const b = JSON.stringify(runSimulation({ requests: generateWorkload('shared-prefix', { seed: 5, requests: 150 }), trace: 'shared-prefix', rateScale: 3, seed: 5 }));
  t.equal(a, b);

  const dir = mkdtempSync(join(tmpdir(), 'infergate-sim-'));
  const out = (n: number) => join(dir, `r${n}.json`);
  const args = (n: number) => ['--generate', 'multi-turn', '--requests', '120', '--rate-scale', '2', '--seed', '9', '--endpoints', '4', '--json', out(n)];
  let printed = '';
  const io = { out: (s: string) => void (printed += s), err: (s: string) => void t.fail(s) };
  t.equal(await simulateMain(args(1), io), 0);
  t.equal(await simulateMain(args(2), io), 0);
  t.equal(readFileSync(out(1), 'utf8'), readFileSync(out(2), 'utf8'), 'same file twice');
  const j = JSON.parse(readFileSync(out(1), 'utf8'));
  t.same(Object.keys(j), ['workload', 'runs']);
  t.match(j.workload, { trace: 'multi-turn', requests: 120, endpoints: 4, seed: 9 });
  t.same(j.runs.map((r: { policy: string }) => r.policy), ['round_robin', 'least_request', 'random', 'scored', 'greedy_estimate', 'oracle']);
  for (const r of j.runs) {
    for (const k of ['requests', 'completed', 'errors', 'rejected', 'throughput_rps', 'output_tokens_per_s', 'prefix_cache_hit_rate']) {
      t.type(r[k], 'number', `${r.policy}.${k}`);
    }
    for (const k of ['ttft_ms', 'itl_ms', 'e2e_ms']) t.same(Object.keys(r[k]), ['p50', 'p90', 'p99', 'mean']);
  }
  t.match(printed, /round_robin/, 'a table on stdout');
  t.match(printed, /columns: done = requests completed.*\n[\s\S]*hit% = /, 'and what its columns mean');
});

t.test('every request is completed, rejected or an error', async (t) => {
  const reqs: SimRequest[] = generateWorkload('burst', { seed: 2, requests: 300 });
  // one prompt the engine cannot take (beyond max_model_len): an error, not a loss
  reqs.push({ arrivalMs: reqs[reqs.length - 1].arrivalMs + 1, inputTokens: 140_000, outputTokens: 4, hashIds: Array.from({ length: 274 }, (_, i) => 9_000_000 + i) });
  const res = runSimulation({
    requests: reqs,
    rateScale: 4,
    endpoints: 3,
    // tight thresholds: the router sheds load, so rejections happen too
    pool: { saturation: { queue_depth: 2, kv_cache: 0.5 } },
  });
  for (const r of res.runs) {
    t.equal(r.completed + r.rejected + r.errors, reqs.length, `${r.policy}: ${r.completed} + ${r.rejected} + ${r.errors}`);
    t.ok(r.errors >= 1, `${r.policy}: the oversized prompt is an error`);
  }
  t.ok(res.runs.some((r) => r.rejected > 0), 'saturation rejects some');
  const lax = runSimulation({ requests: reqs.slice(0, 100), endpoints: 3, policies: ['oracle'], pool: { saturation: { queue_depth: 0, kv_cache: 0 } } });
  t.equal(lax.runs[0].rejected, 0, 'saturation off: the oracle admits everything');
});

// The oracle is greedy (lowest true TTFT for each arrival, blind to what its choice does to later ones), so
// a router that keeps caches warmer can beat it by a little; no policy may beat it by much, and the
// baselines never. (Among policies that shed no more than it: see below.)
t.test('the oracle has the lowest mean TTFT on a small trace (scored: within 15%, greedy_estimate 3%)', { skip: !hasTrace && 'no shared trace' }, async (t) => {
  const reqs = loadTrace(TRACE, 400);
  for (const rateScale of [1, 3]) {
    const res = runSimulation({ requests: reqs, trace: 'mooncake[0:400]', rateScale });
    const oracle = res.runs.find((r) => r.policy === 'oracle')!;
    for (const r of res.runs) {
      // greedy_estimate makes the same greedy choice on an estimate: it can land a hair ahead (0.25% at x1)
      const slack = r.policy === 'scored' ? 0.85 : r.policy === 'greedy_estimate' ? 0.97 : 1;
      // a policy that sheds more than the oracle serves fewer, so its mean over completed requests may look
      // better for that alone (issue #17's yardstick point): it must then do at least as well on goodput,
      // requests served within the SLO per second of all those offered
      if (oracle.ttft_ms.mean * slack > r.ttft_ms.mean && r.rejected > oracle.rejected) {
        const good = (x: typeof r) => headlineOf(x.slo)!.goodput_rps;
        t.ok(good(r) >= good(oracle), `x${rateScale}: ${r.policy}'s lower mean comes with ${r.rejected} shed (oracle ${oracle.rejected}): goodput ${good(r)} ≥ oracle ${good(oracle)}`);
        continue;
      }
      t.ok(oracle.ttft_ms.mean * slack <= r.ttft_ms.mean, `x${rateScale}: oracle ${oracle.ttft_ms.mean} (×${slack}) ≤ ${r.policy} ${r.ttft_ms.mean}`);
    }
  }
});

t.test('targets: checked only where they apply', async (t) => {
  const res = runSimulation({ requests: generateWorkload('no-sharing', { seed: 1, requests: 100 }), trace: 'no-sharing', policies: ['least_request', 'scored'] });
  const rep = checkTargets(res);
  t.ok(rep.applies);
  t.equal(rep.checks.length, 2);
});

t.test('CLI: usage errors exit 2, help exits 0', async (t) => {
  let err = '';
  let out = '';
  const io = { out: (s: string) => void (out += s), err: (s: string) => void (err += s) };
  t.equal(await simulateMain(['--trace', 'x.jsonl', '--generate', 'rag'], io), 2, 'two workloads');
  t.equal(await simulateMain(['--generate', 'nope'], io), 2, 'unknown generator');
  out = '';
  t.equal(await simulateMain(['--requests', '30', '--policies', 'scored'], io), 0, 'no workload named: the shipped trace');
  t.match(out, /mooncake-first400 \(shipped\): 30 requests/);
  // progress goes to stderr only when it is a terminal
  let progress = '';
  const tty = { out: () => undefined, err: (s: string) => void (progress += s), progress: true };
  t.equal(await simulateMain(['--requests', '30', '--policies', 'round_robin,scored'], tty), 0);
  t.match(progress, /round_robin done \(1\/2, [\d.]+ s, about \d+ s left\)\n.*scored done \(2\/2, [\d.]+ s\)\n/s, 'one line per policy, with the time left');
  err = '';
  t.equal(await simulateMain(['--requests', '30', '--policies', 'scored'], io), 0);
  t.equal(err, '', 'no progress when not a terminal');
  t.equal(await simulateMain(['--generate', 'rag', '--policies', 'best'], io), 2, 'unknown policy');
  t.equal(await simulateMain(['--generate', 'rag', '--endpoints', 'x'], io), 2, 'bad number');
  t.equal(await simulateMain(['--bogus'], io), 2, 'unknown flag');
  t.match(err, /--endpoints must be an integer/);
  err = '';
  t.equal(await simulateMain(['--trace', '/nonexistent.jsonl'], io), 1, 'missing file');
  t.match(err, /nonexistent/);
  t.equal(await simulateMain(['--help'], io), 0);
  t.match(out, /Usage: infergate simulate/);
});

t.test('--slo-ttft/--slo-itl give the offered-request figures; --html writes the report', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'infergate-sim-'));
  const json = join(dir, 'r.json');
  const html = join(dir, 'r.html');
  let printed = '';
  let errs = '';
  const io = { out: (s: string) => void (printed += s), err: (s: string) => void (errs += s) };
  const args = ['--generate', 'burst', '--requests', '150', '--rate-scale', '4', '--endpoints', '2', '--policies', 'round_robin,scored,oracle', '--slo-ttft', '500ms,5s', '--slo-itl', '80ms', '--json', json, '--html', html];
  t.equal(await simulateMain(args, io), 0, errs);
  const j = JSON.parse(readFileSync(json, 'utf8'));
  for (const r of j.runs) {
    t.same(r.slo.map((s: { ttft_ms: number; itl_ms: number }) => [s.ttft_ms, s.itl_ms]), [[500, 80], [5000, 80]], `${r.policy}: one entry per bound`);
    t.ok(r.slo[0].attainment <= r.slo[1].attainment, 'a looser bound is met at least as often');
    t.ok(r.slo[1].attainment <= (r.completed / r.requests) + 1e-9, 'attainment counts shed and failed requests as misses');
    t.equal(r.shed_share, Math.round((r.rejected / r.requests) * 1e4) / 1e4);
    t.same(Object.keys(r.ttft_offered_ms), ['p50', 'p90', 'p99']);
  }
  t.match(printed, /slo%\s+good\/s/, 'the table shows the headline SLO (the first bound given)');
  const page = readFileSync(html, 'utf8');
  t.match(page, /id="verdict">(round_robin|scored) wins on goodput at TTFT ≤ 500 ms, ITL ≤ 80 ms/, 'the verdict names a candidate, never the oracle');
  t.match(page, /<svg[\s\S]*TTFT CDF/, 'the offered-TTFT CDF');
  t.match(errs, /wrote .*r\.html/);

  let usage = '';
  t.equal(await simulateMain(['--slo-ttft', '2000'], { out: () => undefined, err: (s) => void (usage += s) }), 2, 'a bound without a unit is a usage error');
  t.match(usage, /--slo-ttft takes durations with a unit/);
});

t.test('by default the JSON has SLOs at 1 s, 2 s and 5 s, 2 s the headline the table shows; --slo-headline picks another', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'infergate-sim-'));
  const json = join(dir, 'r.json');
  const run = async (extra: string[]) => {
    let printed = '';
    let errs = '';
    const code = await simulateMain(['--generate', 'no-sharing', '--requests', '120', '--rate-scale', '4', '--endpoints', '2', '--policies', 'least_request,scored', '--json', json, ...extra], { out: (s) => void (printed += s), err: (s) => void (errs += s) });
    return { code, printed, errs, runs: code === 0 ? JSON.parse(readFileSync(json, 'utf8')).runs : [] };
  };
  const slo = (r: { slo: Array<{ ttft_ms: number; attainment: number; goodput_rps: number; headline?: boolean }> }, ms: number) => r.slo.find((x) => x.ttft_ms === ms)!;
  // the table's slo% and good/s columns of a policy's row (the last two)
  const shown = (printed: string, policy: string) => printed.split('\n').find((l) => l.startsWith(`${policy} `))!.trim().split(/\s+/).slice(-2);
  const d = await run([]);
  t.equal(d.code, 0, d.errs);
  for (const r of d.runs) {
    t.same(r.slo.map((x: { ttft_ms: number; itl_ms: number; headline?: boolean }) => [x.ttft_ms, x.itl_ms, x.headline ?? false]), [[1000, 100, false], [2000, 100, true], [5000, 100, false]], `${r.policy}: 1 s, 2 s, 5 s, the 2 s one marked`);
    t.same(shown(d.printed, r.policy), [(slo(r, 2000).attainment * 100).toFixed(1), slo(r, 2000).goodput_rps.toFixed(2)], `${r.policy}: the table shows the 2 s SLO`);
    t.ok(r.itl_per_request_ms.requests > 0 && r.itl_per_request_ms.mean.p99 <= r.itl_per_request_ms.p99.p99, `${r.policy}: per-request ITL beside the pooled one`);
  }
  t.not(slo(d.runs[0], 1000).attainment, slo(d.runs[0], 2000).attainment, 'the loads differ enough that 1 s and 2 s tell apart (else the column check proves little)');
  const h = await run(['--slo-headline', '1s']);
  t.equal(h.code, 0, h.errs);
  t.same(h.runs[0].slo.map((x: { headline?: boolean }) => x.headline ?? false), [true, false, false], 'the headline moved to 1 s');
  t.same(shown(h.printed, h.runs[0].policy), [(slo(h.runs[0], 1000).attainment * 100).toFixed(1), slo(h.runs[0], 1000).goodput_rps.toFixed(2)], 'and the table with it');
  const bad = await run(['--slo-ttft', '1s,2s', '--slo-headline', '3s']);
  t.equal(bad.code, 2, 'a headline that is not one of the bounds is a usage error');
  t.match(bad.errs, /--slo-headline 3000ms is not one of the --slo-ttft bounds/);
});
