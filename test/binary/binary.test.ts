// The single executable (npm run build:binary): copied alone into an empty directory, it serves a streamed
// chat completion in front of a mock server, answers version and --help, loads its embedded uWS binary
// from a private temporary file that it removes, and stops on SIGTERM with exit 0. Building takes a while:
// scripts/build-binary.mjs reuses the binary when its inputs have not changed.
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { ROOT, gatewayConfig, runCli, tempDir, type Proc } from '../helpers/process.js';
import { chat, metric, scrape, startMocks } from '../e2e/support.js';

const pkgVersion = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

const built = await promisify(execFile)(process.execPath, [join(ROOT, 'scripts', 'build-binary.mjs')], {
  cwd: ROOT,
  timeout: 240_000,
  maxBuffer: 16 * 1024 * 1024,
});
t.comment(built.stdout.trim().split('\n').pop() ?? '');

// the executable alone in an empty directory; its own TMPDIR, to see what it leaves there
const dir = tempDir();
const bin = join(dir, 'infergate');
copyFileSync(join(ROOT, 'dist', 'bin', 'infergate'), bin);
const tmp = join(dir, 'tmp');
mkdirSync(tmp);
// no NODE_OPTIONS or NODE_PATH from the test runner: the binary must need nothing from this checkout
const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: dir, TMPDIR: tmp };

function runBinary(args: string[]): Proc {
  return runCli(args, {}, (nodeArgs) => spawn(bin, nodeArgs.slice(1), { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] }));
}

t.test('version and --help', async (t) => {
  const v = runBinary(['version']);
  t.equal(await v.exited(), 0, v.stderr());
  t.equal(v.stdout().trim(), pkgVersion, 'the version built in, with no package.json beside it');
  const h = runBinary(['--help']);
  t.equal(await h.exited(), 0, h.stderr());
  t.match(h.stdout(), /^Usage: infergate <command> \[options\]$/m);
  t.match(h.stdout(), /^ {2}serve --config FILE/m);
  t.equal(h.stderr(), '', 'no experimental-feature warning on stderr');
});

t.test('serve: a streamed chat completion through the binary, then SIGTERM', async (t) => {
  const mocks = await startMocks(1, ['--model', 'test-model']);
  t.teardown(() => mocks.kill());
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify(gatewayConfig(mocks.endpoints)));
  const gw = runBinary(['serve', '--config', 'gateway.yaml']);
  t.teardown(() => gw.kill('SIGKILL'));
  const [, url] = await gw.waitFor(/^listening on (\S+)$/m);
  const [, adminUrl] = await gw.waitFor(/^admin listening on (\S+)$/m);

  t.same(readdirSync(tmp), [], 'the embedded uWS binary was loaded and its private temporary directory removed');
  t.same(readdirSync(dir).sort(), ['gateway.yaml', 'infergate', 'tmp'], 'nothing else written beside the binary');

  const r = await chat(url, { model: 'test-model', stream: true, messages: [{ role: 'user', content: 'hello from a single binary' }] });
  t.equal(r.status, 200, 'status 200');
  t.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
  t.ok(r.complete, 'the stream ended with data: [DONE]');
  t.ok(r.body.split('\n\n').filter((e) => e.startsWith('data: {')).length >= 2, 'several chunks streamed');

  const samples = await scrape(adminUrl);
  const info = samples.find((s) => s.name === 'infergate_build_info');
  t.equal(info?.labels.version, pkgVersion, 'infergate_build_info names the built-in version');
  t.not(info?.labels.uws ?? 'none', 'none', `served by an embedded native uWS build (${info?.labels.uws})`);
  t.equal(metric(samples, 'infergate_requests_total', { model: 'test-model', code: '200' }), 1);

  t.equal(await gw.kill('SIGTERM'), 0, 'SIGTERM: exit 0');
  t.same(readdirSync(tmp), [], 'no temporary file left after exit');
});

t.test('serve --workers 2: the binary starts its workers from itself', async (t) => {
  const mocks = await startMocks(1, ['--model', 'test-model']);
  t.teardown(() => mocks.kill());
  writeFileSync(join(dir, 'gateway-workers.yaml'), stringify(gatewayConfig(mocks.endpoints)));
  const gw = runBinary(['serve', '--config', 'gateway-workers.yaml', '--workers', '2']);
  t.teardown(() => gw.kill('SIGKILL'));
  const [, url] = await gw.waitFor(/^listening on (\S+)$/m);
  const [, adminUrl] = await gw.waitFor(/^admin listening on (\S+)$/m);
  const list = (await (await fetch(`${adminUrl}/debug/workers`)).json()) as { workers: Array<{ worker: number; state: string }> };
  t.same(list.workers.map((w) => [w.worker, w.state]), [[1, 'ready'], [2, 'ready']], '/debug/workers lists both, ready');
  for (let i = 0; i < 4; i++) {
    const r = await chat(url, { model: 'test-model', stream: true, messages: [{ role: 'user', content: `hello ${i}` }] });
    t.equal(r.status, 200, `request ${i + 1}: status 200`);
    t.ok(r.complete, `request ${i + 1}: the stream ended with data: [DONE]`);
  }
  t.equal(metric(await scrape(adminUrl), 'infergate_requests_total', { model: 'test-model', code: '200' }), 4, 'the parent sums its workers\' counts');
  t.equal(await gw.kill('SIGTERM'), 0, 'SIGTERM: the workers drain and the parent exits 0');
  t.same(readdirSync(tmp), [], 'no temporary file left by any worker');
});

t.test('where the uWS binary cannot be written, serve exits 1 and says why', async (t) => {
  const missing = join(dir, 'no-such-dir');
  const gw = runCli(['serve', '--config', 'gateway.yaml'], {}, (nodeArgs) =>
    spawn(bin, nodeArgs.slice(1), { cwd: dir, env: { ...env, TMPDIR: missing }, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  t.teardown(() => gw.kill('SIGKILL'));
  t.equal(await gw.exited(), 1);
  t.match(gw.stderr(), /no native uWebSockets\.js build loads/);
  t.ok(gw.stderr().includes(missing), 'the message names the temporary directory it could not use');
  t.notMatch(gw.stdout(), /listening on/);
});
