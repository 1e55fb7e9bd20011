// The container image, built from this checkout (docker/build-image.sh: reused when its inputs are
// unchanged) and run as a user would: the gateway in a container on the host's network, in front of mock
// servers this test starts on the host. Needs a Docker engine (.ci/run starts one); skipped without one.
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { ROOT, freePort, tempDir, until } from '../helpers/process.js';
import { startMocks } from '../e2e/support.js';

const IMAGE = 'infergate:test';

/** Runs a command to its end within `ms`; resolves with its output and exit code (never rejects on a code). */
function run(cmd: string, args: string[], ms = 60_000): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: ms, maxBuffer: 64 * 1024 * 1024 }, (error, out, err) => {
      const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
      resolve({ code, out: String(out), err: String(err) + (error && code === null ? ` (${error.message})` : '') });
    });
  });
}

async function docker(args: string[], ms = 60_000): Promise<string> {
  const r = await run('docker', args, ms);
  if (r.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${r.code}: ${r.err.slice(-2000)}`);
  return r.out.trim();
}

const info = await run('docker', ['info', '--format', '{{.ServerVersion}}'], 20_000);
if (info.code !== 0) {
  t.plan(0, `no Docker engine answers "docker info" (${(info.err.trim().split('\n').pop() ?? '').slice(0, 200)}); .ci/run starts one`);
} else {
  // the image build alone can take minutes on a busy machine with the vfs storage driver
  t.setTimeout(20 * 60_000);
  await main();
}

async function main(): Promise<void> {
  // Build (or reuse) the image; the script's stderr is shown only when it fails.
  const build = await new Promise<{ code: number | null; err: string }>((resolve) => {
    const child = spawn(join(ROOT, 'docker', 'build-image.sh'), [IMAGE], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.resume();
    const timer = setTimeout(() => child.kill('SIGTERM'), 15 * 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, err });
    });
  });
  t.equal(build.code, 0, 'docker/build-image.sh builds the image', { stderr: build.err.slice(-3000) });
  if (build.code !== 0) return;
  t.comment((build.err.match(/^(reusing|building) .*$/m) ?? ['?'])[0]);

  // Model servers on the host; a token every 100 ms, so a long answer outlasts the drain.
  const mocks = await startMocks(2, ['--model', 'test-model', '--decode-ms', '100']);
  t.teardown(() => mocks.kill());

  // The image's own default config, with this test's ports and pool: its limits (the drain) stay.
  const config = parse(readFileSync(join(ROOT, 'docker', 'gateway.yaml'), 'utf8')) as Record<string, unknown>;
  const port = await freePort();
  const adminPort = await freePort();
  const file = join(tempDir(), 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      ...config,
      listen: { host: '127.0.0.1', port },
      admin: { host: '0.0.0.0', port: adminPort },
      models: [{ name: 'test-model', pool: 'p' }],
      pools: { p: { endpoints: mocks.endpoints, policy: 'round_robin' } },
    }),
  );
  const name = `infergate-test-${process.pid}-${Date.now()}`;
  // --health-interval: the image's own HEALTHCHECK command, run every second instead of every 10 s
  // --read-only etc.: as docker/k8s/infergate.yaml runs it (read-only root file system, no capabilities)
  await docker(['run', '-d', '--name', name, '--network', 'host', '--health-interval', '1s',
    '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
    '-v', `${file}:/etc/infergate/gateway.yaml:ro`, IMAGE]);
  t.teardown(() => run('docker', ['rm', '-f', name]));
  const logs = async () => {
    const r = await run('docker', ['logs', name]);
    return r.out + r.err;
  };

  const url = `http://127.0.0.1:${port}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await until(async () => /^listening on /m.test(await logs()), 60_000, 'the container to print "listening on"');

  await t.test('the start log names the uWS build: 20.57, native, on Node 24', async (t) => {
    const lines = (await logs()).split('\n').filter((l) => l.includes('"msg":"uws '));
    t.equal(lines.length, 1, 'one line');
    const log = JSON.parse(lines[0]) as { msg: string; node: string };
    t.equal(log.msg, 'uws 20.57 native');
    t.match(log.node, /^24\./);
  });

  await t.test('inside the container the loader chooses 20.57 on its own', async (t) => {
    const out = await docker(['exec', name, 'node', '--input-type=module', '-e',
      "const m = await import('/app/dist/common/uws.js'); m.loadUws(); console.log(process.versions.node, m.uwsInUse().version);"]);
    t.match(out, /^24\.\S+ 20\.57$/);
    const binaries = await docker(['exec', name, 'sh', '-c', "find /app/node_modules -name '*.node' | sed 's|.*/||'"]);
    t.equal(binaries, `uws_linux_${process.arch}_137.node`, 'only the running platform\'s uWS binary is in the image');
  });

  await t.test('/healthz answers on the admin port', async (t) => {
    const r = await fetch(`${adminUrl}/healthz`, { signal: AbortSignal.timeout(5_000) });
    t.equal(r.status, 200);
    t.same(await r.json(), { status: 'ok' });
  });

  await t.test('HEAD answers carry the GET body\'s Content-Length on 20.57 (its endWithoutBody(n) works)', async (t) => {
    const get = await fetch(`${adminUrl}/healthz`, { signal: AbortSignal.timeout(5_000) });
    const length = (await get.arrayBuffer()).byteLength;
    const head = await fetch(`${adminUrl}/healthz`, { method: 'HEAD', signal: AbortSignal.timeout(5_000) });
    t.equal(head.status, 200);
    t.equal(head.headers.get('content-length'), String(length));
    t.equal((await head.arrayBuffer()).byteLength, 0, 'and no body');
  });

  await t.test('HTTP/1.0 gets 505 at once from 20.57 (20.30 held the connection without an answer)', async (t) => {
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = connect(port, '127.0.0.1');
      let data = '';
      const timer = setTimeout(() => (sock.destroy(), reject(new Error(`no close within 5 s; got ${JSON.stringify(data)}`))), 5_000);
      sock.on('data', (d: Buffer) => (data += d.toString()));
      sock.on('error', () => undefined);
      sock.on('close', () => (clearTimeout(timer), resolve(data)));
      sock.write('GET /v1/models HTTP/1.0\r\n\r\n');
    });
    t.match(answer, /^HTTP\/1\.1 505 /, 'answered 505, and the connection closed');
  });

  await t.test('a streamed chat completion through the container ends with [DONE]', async (t) => {
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
      signal: AbortSignal.timeout(30_000),
    });
    t.equal(r.status, 200);
    t.match(r.headers.get('content-type'), /text\/event-stream/);
    const body = await r.text();
    t.match(body, /^data: \{.*"chat\.completion\.chunk"/m);
    t.ok(body.trimEnd().endsWith('data: [DONE]'), 'ends with data: [DONE]');
  });

  await t.test('the gateway runs as a non-root user', async (t) => {
    const status = await docker(['exec', name, 'cat', '/proc/1/status']);
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    t.ok(uid !== undefined && uid !== '0', `PID 1 runs as uid ${uid}`);
    t.match(await docker(['exec', name, 'cat', '/proc/1/cmdline']), /node.*\/app\/dist\/cli\.js.*serve/);
  });

  await t.test('the HEALTHCHECK turns healthy (it finds the admin port in the config)', async (t) => {
    const status = await until(async () => {
      const s = await docker(['inspect', '-f', '{{.State.Health.Status}}', name]);
      return s === 'healthy' || s === 'unhealthy' ? s : undefined;
    }, 60_000, 'a health verdict');
    t.equal(status, 'healthy');
  });

  await t.test('docker stop during a long stream: the drain ends within the grace period, exit code 0', async (t) => {
    // an answer of 400 tokens at 100 ms each (40 s) is in flight when the stop comes
    const ctrl = new AbortController();
    t.teardown(() => ctrl.abort());
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: 400, messages: [{ role: 'user', content: 'a long one' }] }),
      signal: ctrl.signal,
    });
    t.equal(r.status, 200);
    const reader = r.body!.getReader();
    const first = await reader.read();
    t.notOk(first.done, 'the stream has begun');
    const over = (async () => {
      try {
        for (;;) if ((await reader.read()).done) return 'ended';
      } catch {
        return 'cut';
      }
    })();
    // docker stop: SIGTERM, then SIGKILL once its default 10 s grace is over
    const stop = await run('docker', ['stop', name], 60_000);
    t.equal(stop.code, 0, 'docker stop returns');
    const state = await docker(['inspect', '-f', '{{.State.ExitCode}} {{.State.OOMKilled}}', name]);
    t.equal(state, '0 false', 'exit code 0: drained and exited by itself, not killed (137)');
    t.match(await logs(), /"msg":"draining in-flight requests"/, 'it was draining a request when it stopped');
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([over, new Promise<string>((res) => (timer = setTimeout(res, 10_000, 'still open')))]);
    clearTimeout(timer);
    t.not(outcome, 'still open', `the client's stream is over once the gateway is gone (${outcome})`);
  });

  await t.test('a mock container from the same image turns healthy: the HEALTHCHECK probes its --port', async (t) => {
    const mockPort = await freePort();
    const mockName = `${name}-mock`;
    await docker(['run', '-d', '--name', mockName, '--network', 'host', '--health-interval', '1s', '--read-only',
      IMAGE, 'mock', '--port', String(mockPort), '--model', 'test-model']);
    t.teardown(() => run('docker', ['rm', '-f', mockName]));
    const status = await until(async () => {
      const s = await docker(['inspect', '-f', '{{.State.Health.Status}}', mockName]);
      return s === 'healthy' || s === 'unhealthy' ? s : undefined;
    }, 60_000, 'a health verdict for the mock');
    t.equal(status, 'healthy');
  });
}
