/**
 * A tiny live `policies` run end to end: 2 mocks, a dozen trace requests, high time-scale, the real
 * gateway and mock processes, then the JSON and the HTML report. Runs the compiled bench (dist-bench).
 */
import t from 'tap';
import { BENCH_CLI, runBench } from '../helpers/bench.js';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
// the trace shipped in the repository: the test needs nothing outside the clone
const trace = path.join(root, 'native-bench', 'traces', 'mooncake-first400.jsonl');



t.test('a tiny policies run writes valid JSON and an HTML report with charts', { skip: !existsSync(trace) && 'shared trace missing', timeout: 90_000 }, async (t) => {
  t.ok(existsSync(BENCH_CLI), 'bench compiled');
  const out = mkdtempSync(path.join(os.tmpdir(), 'bench-policies-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = await runBench(['policies', '--endpoints', '2', '--requests', '12', '--time-scale', '50', '--policies', 'round_robin,scored', '--trace', trace, '--out', out], 80_000);
  t.equal(r.code, 0, r.err.slice(-2000));
  const json = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
  t.equal(json.scenario, 'policies');
  t.equal(typeof json.valid, 'boolean');
  t.ok(json.machine && json.versions && json.settings, 'machine, versions and settings recorded');
  t.equal(json.time_scale, 50);
  t.match(json.time_note, /x 50/);
  t.same(json.workload, { trace, requests: 12, endpoints: 2, seed: 1 });
  t.equal(json.runs.length, 2);
  for (const run of json.runs) {
    t.equal(run.requests, 12);
    t.equal(run.completed + run.errors + run.rejected, 12, `${run.policy}: every request accounted for`);
    t.ok(run.completed > 0, `${run.policy}: some completed`);
    for (const k of ['ttft_ms', 'itl_ms', 'e2e_ms']) t.ok(['p50', 'p90', 'p99', 'mean'].every((q) => typeof run[k][q] === 'number'), `${run.policy}.${k}`);
    t.ok(run.ttft_ms.p50 > 0);
    t.type(run.throughput_rps, 'number');
    t.type(run.prefix_cache_hit_rate, 'number');
    t.type(run.lag.p99_ms, 'number');
    t.equal(run.per_endpoint.length, 2);
    t.equal(run.shed_share, Math.round((run.rejected / 12) * 1e4) / 1e4, `${run.policy}: shed share`);
    t.same(run.slo.map((x: { ttft_ms: number; itl_ms: number; headline?: boolean }) => [x.ttft_ms, x.itl_ms, x.headline ?? false]), [[1000, 100, false], [2000, 100, true], [5000, 100, false]], 'the default objectives, 2 s the headline');
    t.ok(run.slo[0].attainment >= 0 && run.slo[0].attainment <= run.completed / 12, 'attainment over offered requests');
    t.same(Object.keys(run.ttft_offered_ms), ['p50', 'p90', 'p99']);
  }
  t.ok(json.simulated && json.simulated.runs.length === 2, 'the same settings went through simulate');
  t.ok(json.comparison.length > 0);
  const html = readFileSync(path.join(out, 'report.html'), 'utf8');
  t.match(html, /<svg/);
  t.match(html, /id="verdict">(round_robin|scored) (wins on goodput|and (round_robin|scored) tie)/, 'a verdict on top');
  t.match(html, /TTFT CDF/);
  t.match(html, /load per endpoint/);
  t.notMatch(r.err, /\[1\/2\]/, 'stderr is not a terminal here: no progress lines');
});

t.test('an unknown scenario exits 2 with the usage', async (t) => {
  const r = await runBench(['nope'], 20_000);
  t.equal(r.code, 2);
  t.match(r.err, /usage: npm run bench/);
});
