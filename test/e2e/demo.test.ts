// `infergate demo` as a newcomer meets it: it starts, prints a curl command, that command (pasted into a
// shell, run with the real curl) streams an answer, running it again lands on the same pod, and Ctrl-C
// (SIGINT) stops everything with exit 0.
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli, onFreePorts, type Proc } from './support.js';
import { ROOT, tempDir } from '../helpers/process.js';

/** Runs a command line in sh, as a user pasting it would; resolves with its exit code and stdout. */
function sh(cmd: string, ms = 15_000): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((res, rej) => {
    const child = spawn('sh', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      rej(new Error(`${cmd.slice(0, 80)}… did not finish within ${ms} ms`));
    }, ms);
    child.on('exit', (code) => {
      clearTimeout(timer);
      res({ code, out, err });
    });
  });
}

async function exercise(t: Test, demo: Proc) {
  t.teardown(() => demo.kill('SIGKILL'));
  const [, cmd] = await demo.waitFor(/^ {2}(curl -sN [^]*?-d '[^']*')$/m, 20_000);
  t.match(demo.stdout(), /^listening on http:\/\/127\.0\.0\.1:\d+$/m, 'prints the listening line');
  t.equal((demo.stdout().match(/^mock vLLM server on /gm) ?? []).length, 4, 'four mock servers');
  const endpoints: string[] = [];
  const cached: number[] = [];
  for (let run = 0; run < 2; run++) {
    const r = await sh(cmd);
    t.equal(r.code, 0, `curl run ${run + 1} exits 0`);
    const [head, body = ''] = r.out.split(/\r\n\r\n/, 2).length === 2 ? [r.out.slice(0, r.out.indexOf('\r\n\r\n')), r.out.slice(r.out.indexOf('\r\n\r\n') + 4)] : [r.out];
    t.match(head, /^HTTP\/1\.1 200/, 'status 200');
    t.match(head, /\r\ncontent-type: text\/event-stream/i, 'an SSE answer');
    const events = body.split('\n\n').filter((e) => e.startsWith('data: '));
    t.ok(events.length > 3, `${events.length} SSE events`);
    t.equal(events.at(-1), 'data: [DONE]', 'ends with data: [DONE]');
    const text = events.slice(0, -1).map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '').join('');
    t.ok(text.trim().length > 0, `text arrived: ${JSON.stringify(text.slice(0, 40))}…`);
    endpoints.push(/\r\nx-infergate-endpoint: (\S+)/i.exec(head)?.[1] ?? '');
    cached.push(Number(/"cached_tokens":(\d+)/.exec(body)?.[1] ?? NaN));
  }
  // the demo prints "run it twice: the second answer comes from the same pod, whose cache holds the prompt"
  await t.test(
    'the second run comes from the same pod, served from its cache',
    async (t) => {
      t.equal(endpoints[1], endpoints[0], `second run: ${endpoints[1]}, first: ${endpoints[0]}`);
      t.ok(cached[1] > 0, `cached_tokens ${cached[0]} then ${cached[1]}`);
    },
  );
  demo.child.kill('SIGINT');
  t.equal(await demo.exited(10_000), 0, 'SIGINT: exit 0');
}

/** The demo with its mocks on 4 consecutive free ports (others if a parallel test takes one meanwhile). */
function startDemo(args: (base: number) => string[]): Promise<Proc> {
  return onFreePorts(4, async (base) => {
    const demo = runCli(args(base));
    try {
      await demo.waitFor(/^listening on /m, 20_000);
    } catch (e) {
      await demo.kill('SIGKILL');
      throw e;
    }
    return demo;
  });
}

t.test('demo with its config on free ports (--config)', async (t) => {
  // config/demo.yaml with the ports moved: 4 consecutive free ones for the mocks, any for the listeners
  const demo = await startDemo((base) => ['demo', '--config', demoConfig(base), '--time-scale', '10']);
  await exercise(t, demo);
});

function demoConfig(base: number): string {
  const cfg = parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as Record<string, any>;
  cfg.listen.port = 0;
  cfg.admin.port = 0;
  cfg.logging = { ...cfg.logging, level: 'warn', access_log: false };
  // the key set's path is relative to the config file: the copy names the dev key set where it is
  cfg.auth.jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');
  const pool = Object.values(cfg.pools)[0] as { endpoints: string[] };
  pool.endpoints = [0, 1, 2, 3].map((k) => `127.0.0.1:${base + k}`);
  const file = join(tempDir(), 'demo.yaml');
  writeFileSync(file, stringify(cfg));
  return file;
}

t.test('plain `infergate demo` with its shipped config, ports moved by flags', async (t) => {
  const demo = await startDemo((base) => ['demo', '--port', '0', '--admin-port', '0', '--mock-port', String(base), '--time-scale', '10']);
  await exercise(t, demo);
});
