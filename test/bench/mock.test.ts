/**
 * The `mock` scenario: the SSE event counter on split chunks, and a tiny live run (2 mock servers, 4
 * clients, 1 s) that must write mock.json with events flowing. Runs the compiled bench (dist-bench).
 */
import t from 'tap';
import { BENCH_CLI, runBench } from '../helpers/bench.js';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SseEventCounter, procCpuSeconds } from '../../native-bench/mock.js';




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
  t.ok(existsSync(BENCH_CLI), 'bench compiled');
  const out = mkdtempSync(path.join(os.tmpdir(), 'bench-mock-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = await runBench(['mock', '--count', '2', '--connections', '4', '--duration', '1', '--max-tokens', '16', '--out', out], 50_000);
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
