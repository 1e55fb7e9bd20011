/**
 * The `mock` scenario: the SSE event counter on split chunks, and a tiny live run (2 mock servers, 4
 * clients, 1 s) that must write mock.json with events flowing. Runs the compiled bench (dist-bench).
 */
import t from 'tap';
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SseEventCounter, procCpuSeconds } from '../../native-bench/mock.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(root, 'dist-bench', 'native-bench', 'cli.js');

t.before(() => {
  // tsc emits even when another part of the tree has a type error; what matters is that the files are there.
  spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.bench.json')], { cwd: root, stdio: 'inherit', timeout: 120_000 });
});

function run(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { err += b; });
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => { clearTimeout(killer); resolve({ code, out, err }); });
  });
}

t.test('SseEventCounter counts data events across chunk splits, [DONE] excluded', async (t) => {
  const head = 'data: {"id":"x","choices":[{"index":0,';
  const stream =
    head + '"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n' +
    head + '"delta":{"content":"Hello"},"finish_reason":null}]}\n\n' +
    ': a comment\n\n' +
    head + '"delta":{"content":" \\"world\\""},"finish_reason":"length"}]}\n\n' +
    'data: {"id":"x","choices":[],"usage":{"completion_tokens":2}}\n\n' +
    'data: [DONE]\n\n';
  for (const size of [1, 3, 7, 64, stream.length]) {
    const c = new SseEventCounter();
    for (let i = 0; i < stream.length; i += size) c.push(stream.slice(i, i + size));
    t.equal(c.events, 4, `chunks of ${size}: role, 2 tokens, usage`);
    t.equal(c.tokens, 2, `chunks of ${size}: content-carrying events`);
    t.ok(c.done, `chunks of ${size}: [DONE] seen`);
  }
  const cut = new SseEventCounter();
  cut.push(head + '"delta":{"content":"a"}}]}\n\ndata: {"partial');
  t.equal(cut.events, 1, 'an unfinished event is not counted');
  t.notOk(cut.done);
});

t.test('procCpuSeconds reads this process (or null without /proc)', async (t) => {
  const v = procCpuSeconds(process.pid, 100);
  if (existsSync('/proc/self/stat')) t.ok(v !== null && v >= 0, `cpu ${v}`);
  else t.equal(v, null);
});

t.test('a tiny mock run writes mock.json with events flowing', { timeout: 60_000 }, async (t) => {
  t.ok(existsSync(cli), 'bench compiled');
  const out = mkdtempSync(path.join(os.tmpdir(), 'bench-mock-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = await run(['mock', '--count', '2', '--connections', '4', '--duration', '1', '--max-tokens', '16', '--out', out], 50_000);
  t.equal(r.code, 0, r.err.slice(-2000));
  const json = JSON.parse(readFileSync(path.join(out, 'mock.json'), 'utf8'));
  t.equal(json.scenario, 'mock');
  t.ok(json.machine && json.versions && json.settings, 'machine, versions and settings recorded');
  t.match(json, { count: 2, connections: 4, time_scale: 20, max_tokens: 16 });
  t.ok(json.events_per_s > 0, `events_per_s ${json.events_per_s}`);
  t.ok(json.tokens_per_s > 0 && json.tokens_per_s < json.events_per_s, 'tokens exclude the role-only first chunk');
  t.ok(json.requests_per_s > 0, `requests_per_s ${json.requests_per_s}`);
  t.equal(json.errors, 0, String(json.last_error));
  for (const k of ['mock_cpu_cores', 'events_per_cpu_s']) t.ok(json[k] === null || typeof json[k] === 'number', k);
  t.type(json.client_cpu_note, 'string');
  t.match(r.out, /^mock: --count 2, 4 conns.* events\/s/m, 'one-line summary');
});
