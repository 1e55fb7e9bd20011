// Every command and every benchmark scenario answers --help with its usage and exit 0, and does nothing
// else: the process ends on its own (a server would keep running) and writes no file where it runs. A
// usage error (unknown option, a missing value, an unknown command) exits 2 and says what is known.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, ROOT, tempDir } from '../helpers/process.js';

const BENCH = join(ROOT, 'dist-bench', 'native-bench', 'cli.js'); // built by `npm test`'s pretest

function run(script: string, args: string[]) {
  const cwd = tempDir();
  const r = spawnSync(process.execPath, [script, ...args], { cwd, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, files: readdirSync(cwd) };
}

const commands = ['serve', 'check-config', 'schema', 'mock', 'demo', 'token', 'simulate', 'version'];
const scenarios = ['overhead', 'streams', 'picker', 'policies', 'mock', 'quota', 'auth', 'reliability'];

t.test('infergate COMMAND --help', async (t) => {
  for (const c of commands) {
    const r = run(CLI, [c, '--help']);
    t.equal(r.status, 0, `${c}: exit 0`);
    t.equal(r.signal, null, `${c}: ended by itself`);
    t.match(r.stdout, new RegExp(`^usage: infergate ${c}`, 'i'), `${c}: prints its usage`);
    t.same(r.files, [], `${c}: wrote no file`);
  }
  const top = run(CLI, ['--help']);
  t.equal(top.status, 0);
  for (const c of commands) t.match(top.stdout, c, `the overview names ${c}`);
});

t.test('npm run bench -- SCENARIO --help', async (t) => {
  for (const s of scenarios) {
    const r = run(BENCH, [s, '--help']);
    t.equal(r.status, 0, `${s}: exit 0`);
    t.equal(r.signal, null, `${s}: ended by itself (nothing was run)`);
    t.match(r.stdout, new RegExp(`^usage: npm run bench -- ${s} `), `${s}: prints its usage`);
    t.same(r.files, [], `${s}: wrote no file (no bench-out/)`);
  }
  const top = run(BENCH, ['--help']);
  t.equal(top.status, 0);
  for (const s of scenarios) t.match(top.stdout, `  ${s} `, `the overview names ${s}`);
});

t.test('usage errors exit 2 and list what is known', async (t) => {
  const unknown = run(BENCH, ['picker', '--bogus', '1']);
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /--bogus/);
  t.match(unknown.stderr, /known options: .*--endpoints/);
  t.same(unknown.files, [], 'nothing ran');
  const noValue = run(BENCH, ['picker', '--endpoints']);
  t.equal(noValue.status, 2, 'an option without its value');
  t.equal(run(BENCH, ['nope']).status, 2, 'an unknown scenario');
  t.equal(run(BENCH, []).status, 2, 'no scenario');
  t.equal(run(CLI, ['nope']).status, 2, 'an unknown command');
  t.equal(run(CLI, ['schema', 'extra']).status, 2, 'schema takes no arguments');
  for (const c of ['serve', 'check-config', 'mock', 'demo', 'simulate']) {
    const r = run(CLI, [c, '--bogus']);
    t.equal(r.status, 2, `${c} --bogus: exit 2`);
    t.match(r.stderr, /--bogus/, `${c}: names the option`);
  }
});
