// --tune: the minimax-regret objective on a hand-made case, and a whole search holding one generator out
// under a constraint (affinity), starting from prefix 6: the first move, prefix 12, breaks it.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simulateMain } from '../../src/sim/cli.js';
import { runCli } from '../helpers/process.js';
import { admissible, minimaxPick, regrets } from '../../src/sim/tune-objective.js';

t.test('minimax regret: relative regrets, worst case first, then the mean, ties to the defaults', async (t) => {
  // candidates × inputs (A, B, C); candidate 0 is the defaults
  const table = [
    [10, 10, 10],
    [12, 9, 10], // best on A, but its worst case (B) is the worst of all
    [11, 10, 10.5],
    [10, 12, 10],
  ];
  const r = regrets(table);
  t.strictSame(r.best, [12, 12, 10.5]);
  t.equal(r.regret[0][0], 2 / 12);
  t.equal(r.regret[0][2], 0.5 / 10.5);
  t.equal(r.worst[1], 0.25, "candidate 1's worst is input B: (12 − 9) / 12");
  // 0, 2 and 3 share the worst regret 2/12; 3's mean regret is the lowest
  t.equal(r.worst[0], r.worst[2]);
  t.equal(r.worst[0], r.worst[3]);
  t.equal(minimaxPick(table), 3);
  // a candidate closer to the best everywhere wins on its worst case
  const more = [...table, [11, 11, 10.2]];
  t.equal(minimaxPick(more), 4);
  // the lowest worst regret of all (0.4 / 10.5 on C), though 1% below the defaults on C
  const trade = [...more, [12, 12, 9.9]];
  t.ok(regrets(trade).worst[5] < regrets(trade).worst[4]);
  t.equal(minimaxPick(trade), 5, 'pure minimax takes the trade');
  t.equal(minimaxPick(trade, 0.02), 5, 'a 1% loss is within a 2% bound');
  t.equal(minimaxPick(trade, 0), 4, 'never worse than the defaults anywhere: not admissible');
  t.strictSame(admissible(trade, 0), [true, false, true, true, true, false]);
  t.strictSame(admissible(trade), [true, true, true, true, true, true]);
  // all equal: the defaults; an input nobody serves has no regret
  t.equal(minimaxPick([[5, 0], [5, 0]]), 0);
  t.strictSame(regrets([[5, 0], [4, 0]]).regret[1], [0.2, 0]);
  t.throws(() => minimaxPick([]));
});

t.test('--tune holding one generator out: the held-out figures, never worse in sample, deterministic', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'infergate-tune-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, 'prefix6.yaml');
  writeFileSync(config, 'auth: { mode: none, allow_unauthenticated: true }\nmodels: [{ name: m, pool: p }]\npools: { p: { endpoints: ["127.0.0.1:1"], scoring: { prefix: 6, queue: 2, running: 1, kv_cache: 2, lora: 1, load: 2 } } }\n');
  const argsFor = (json: string) => ['--tune', '--tune-inputs', 'shared-prefix,no-sharing,multi-turn', '--requests', '120', '--endpoints', '4', '--tune-scales', '1,2,4', '--tune-budget', '5', '--holdout', 'multi-turn', '--tune-constraints', 'affinity', '--config', config, '--json', json];
  const run = async (json: string, extra: string[] = []) => {
    let out = '';
    let err = '';
    const args = [...argsFor(json), ...extra];
    const code = await simulateMain(args, { out: (s) => void (out += s), err: (s) => void (err += s) });
    return { code, out, err, report: code === 0 ? JSON.parse(readFileSync(json, 'utf8')).tune : undefined };
  };
  const a = await run(join(dir, 'a.json'));
  t.equal(a.code, 0, a.err);
  const r = a.report;
  t.strictSame(r.objective.rate_scales, [1, 2, 4], 'three loads');
  t.equal(r.objective.slo_ttft_ms, 2000, 'the 2 s SLO is the objective');
  t.strictSame(r.tuned_on, ['shared-prefix', 'no-sharing'], 'the held-out input is not tuned on');
  t.ok(r.candidates >= 2 && r.candidates <= 5, `the budget holds (${r.candidates})`);

  t.equal(r.holdout.length, 1);
  const h = r.holdout[0];
  t.equal(h.input, 'multi-turn');
  for (const k of ['defaults_goodput', 'tuned_goodput', 'best_goodput'] as const) t.ok(h[k] > 0, `held out: ${k} ${h[k]}`);
  t.ok(h.best_goodput >= h.tuned_goodput && h.best_goodput >= h.defaults_goodput, 'the best found there is at least both');
  t.strictSame(h.weights, r.tuned, 'the held-out row runs the weights tuned on the others');

  for (const x of r.per_input) t.equal(x.scales.length, 3, `${x.input}: one figure per load`);
  t.ok(r.worst_regret.tuned <= r.worst_regret.defaults, `worst regret on the inputs tuned on: tuned ${r.worst_regret.tuned} ≤ defaults ${r.worst_regret.defaults}`);
  t.match(a.out, /multi-turn\s+no \(held out\)/, 'the table marks the held-out input');
  t.match(a.out, /held out\s+defaults good\/s\s+tuned good\/s\s+best found/);
  t.match(a.out, /scoring:\n  prefix: [\d.]+\n  queue: /, 'a block to paste into a config');
  t.match(a.err, /tune without multi-turn: candidate \d+\/5/, 'progress on stderr');

  // the constraint: prefix 12 (the first sweep's first move) keeps a request on the holder although the
  // other endpoint is far less loaded, so it is rejected, listed, never run, and the chosen weights keep it
  const c0 = r.constraints;
  t.strictSame(c0.names, ['affinity']);
  t.ok(c0.defaults.every((x: { ok: boolean }) => x.ok), 'the defaults keep it');
  t.ok(c0.tuned.every((x: { ok: boolean }) => x.ok), 'the tuned weights keep it');
  t.equal(r.defaults.prefix, 6, 'the search starts from the config');
  const heavy = c0.rejected.find((x: { weights: { prefix: number } }) => x.weights.prefix === 12);
  t.ok(heavy, 'prefix 12 is rejected');
  t.equal(heavy.failed[0].constraint, 'affinity');
  t.not(r.tuned.prefix, 12);
  t.match(a.out, /constraints \(affinity; src\/sim\/README\.md, "Tuning"\): \d+ weight sets checked, [1-9]\d* not admissible/);
  t.match(a.out, /rejected \(prefix,queue,running,kv_cache,lora,load\):\n    12,2,1,2,1,2: affinity: not as promised: /);
  t.match(a.err, /candidate 2\/5: 12,2,1,2,1,2 not admissible \(affinity: /, 'the rejection in the progress lines');

  const b = await run(join(dir, 'b.json'));
  t.equal(readFileSync(join(dir, 'b.json'), 'utf8'), readFileSync(join(dir, 'a.json'), 'utf8'), 'same inputs and seed: the same report');
  t.equal(b.out, a.out);
  // the built CLI with two worker threads: the same report
  const proc = runCli(['simulate', ...argsFor(join(dir, 'w.json')), '--tune-jobs', '2']);
  t.equal(await proc.exited(120_000), 0, proc.stderr());
  t.equal(readFileSync(join(dir, 'w.json'), 'utf8'), readFileSync(join(dir, 'a.json'), 'utf8'), '--tune-jobs 2 changes nothing in the report');

  // with --tune-max-loss 0 the tuned weights are never worse than the defaults on any input tuned on
  const c = await run(join(dir, 'c.json'), ['--tune-max-loss', '0']);
  t.equal(c.code, 0, c.err);
  t.equal(c.report.objective.max_loss, 0);
  for (const x of c.report.per_input.filter((x: { tuned_on: boolean }) => x.tuned_on)) {
    t.ok(x.tuned_goodput >= x.defaults_goodput, `${x.input}: tuned ${x.tuned_goodput} ≥ defaults ${x.defaults_goodput}`);
  }
});

t.test('--tune usage errors', async (t) => {
  let err = '';
  const io = { out: () => undefined, err: (s: string) => void (err += s) };
  t.equal(await simulateMain(['--tune', '--tune-inputs', 'shared-prefix,bogus'], io), 2);
  t.match(err, /"bogus" is neither a generator/);
  err = '';
  t.equal(await simulateMain(['--tune', '--tune-inputs', 'shared-prefix,rag', '--holdout', 'multi-turn'], io), 2);
  t.match(err, /--holdout multi-turn: not one of the inputs/);
  err = '';
  t.equal(await simulateMain(['--tune', '--generate', 'rag', '--holdout', 'rag'], io), 2);
  t.match(err, /--holdout needs at least two/);
  err = '';
  t.equal(await simulateMain(['--tune', '--tune-inputs', 'rag,rag'], io), 2);
  t.match(err, /names an input twice/);
  err = '';
  t.equal(await simulateMain(['--tune', '--generate', 'rag', '--tune-max-loss', '2'], io), 2);
  t.match(err, /--tune-max-loss is a share between 0 and 1/);
  err = '';
  t.equal(await simulateMain(['--tune', '--generate', 'rag', '--replicas', '2'], io), 2);
  t.match(err, /it does not take --replicas/);
  err = '';
  t.equal(await simulateMain(['--tune', '--generate', 'rag', '--tune-constraints', 'priority,fast'], io), 2);
  t.match(err, /--tune-constraints takes priority, affinity \(comma-separated\) or none, not "fast"/);
});
