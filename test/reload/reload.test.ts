// Config hot reload through a real gateway process (dist/cli.js), real `infergate mock` servers and a
// scriptable upstream over sockets: SIGHUP and file changes apply a new config while a stream is open
// (the stream completes, the removed endpoint gets nothing new, the added model answers); a broken file
// changes nothing and is logged with its line; a listener change is reported as needing a restart while
// the rest applies; alias weights and a pool's policy change at once.
import t from 'tap';
import type { Test } from 'tap';
import { renameSync, symlinkSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli, tempDir, ROOT, type RunningGateway } from '../helpers/process.js';
import { startUpstream, sseBody } from '../helpers/upstream.js';
import { startMocks, chat, scrape, metric, until, debugPools, longText } from '../e2e/support.js';

const mockA = await startMocks(1, ['--model', 'test-model', '--time-scale', '20', '--seed', '3']);
t.teardown(() => mockA.kill());
const mockC = await startMocks(1, ['--model', 'other-model', '--time-scale', '20', '--seed', '4']);
t.teardown(() => mockC.kill());
const A = mockA.endpoints[0];
const C = mockC.endpoints[0];

// B: an upstream whose streams send half their events, then wait until the test releases them
const held: Array<() => void> = [];
const B = await startUpstream((_req, res) => {
  const events = sseBody(10).split(/(?<=\n\n)/);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(events.slice(0, 5).join(''));
  held.push(() => res.end(events.slice(5).join('')));
});
t.teardown(() => B.close());

type Cfg = Record<string, unknown>;

function config(pools: Record<string, string[]>, models: unknown[], over: Cfg = {}): Cfg {
  const poolCfg: Record<string, unknown> = {};
  for (const [name, endpoints] of Object.entries(pools)) {
    poolCfg[name] = { endpoints, policy: 'round_robin', metrics: { interval: '100ms', stale_after: '1s' } };
  }
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, watch_config: false },
    debug_headers: true,
    auth: { mode: 'none', allow_unauthenticated: true },
    logging: { level: 'info', access_log: false },
    models,
    pools: poolCfg,
    ...over,
  };
}

interface Served extends RunningGateway {
  file: string;
  /** replace the file the way editors do: write beside it, rename over it */
  write(cfg: Cfg | string): void;
  reloads(result: string): Promise<number>;
  /** the JSON log lines (pino, stdout) */
  logs(): Array<Record<string, unknown>>;
}

/** `infergate serve` on `cfg` (written to `file` unless null: the file is there already), until it listens. */
async function serve(tt: Test, cfg: Cfg | null, opts: { file?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Served> {
  const file = opts.file ?? join(tempDir(), 'gateway.yaml');
  if (cfg) writeFileSync(file, stringify(cfg));
  const proc = runCli(['serve', '--config', file], opts.env);
  tt.teardown(() => proc.kill());
  const [, url] = await proc.waitFor(/^listening on (\S+)$/m);
  const [, adminUrl] = await proc.waitFor(/^admin listening on (\S+)$/m);
  return {
    url,
    adminUrl,
    proc,
    stop: () => proc.kill(),
    file,
    write(next) {
      writeFileSync(`${file}.tmp`, typeof next === 'string' ? next : stringify(next));
      renameSync(`${file}.tmp`, file);
    },
    async reloads(result) {
      return metric(await scrape(adminUrl), 'infergate_config_reloads_total', { result });
    },
    logs() {
      return proc
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    },
  };
}

const ask = (url: string, model: string, extra: Cfg = {}) => chat(url, { model, messages: [{ role: 'user', content: `hello ${model}` }], max_tokens: 5, ...extra });

t.test('SIGHUP: a model added and an endpoint removed while a stream is open on it; the stream completes', async (t) => {
  const models = [{ name: 'test-model', pool: 'p' }];
  const gw = await serve(t, config({ p: [B.endpoint] }, models));
  // a stream held open on B
  const stream = fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'a long answer' }] }),
    signal: AbortSignal.timeout(60_000),
  });
  const res = await stream;
  t.equal(res.status, 200);
  t.equal(res.headers.get('x-infergate-endpoint'), B.endpoint, 'the stream is served by B');
  const reader = res.body!.getReader();
  let text = '';
  const decoder = new TextDecoder();
  while (!text.includes('tok4')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  t.match(text, /tok4 /, 'half of the stream arrived');
  t.equal(B.received.length, 1);

  gw.write(config({ p: [A], q: [C] }, [...models, { name: 'other-model', pool: 'q' }, { name: 'other-alias', targets: [{ model: 'other-model', weight: 1 }] }]));
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'reloads_total{result="success"} 1');

  const other = await ask(gw.url, 'other-model');
  t.equal(other.status, 200, 'the added model answers');
  t.ok(other.complete);
  t.equal(other.endpoint, C, 'from the added pool');
  const viaAlias = await ask(gw.url, 'other-alias');
  t.equal(viaAlias.status, 200, 'the added alias answers');
  t.equal(viaAlias.endpoint, C);
  for (let i = 0; i < 3; i++) {
    const r = await ask(gw.url, 'test-model');
    t.equal(r.status, 200);
    t.equal(r.endpoint, A, 'test-model now goes to A');
  }
  t.equal(B.received.length, 1, 'B got no new request');
  const pools = await debugPools(gw);
  t.same(pools.p.endpoints.map((e) => e.endpoint), [A], '/debug/pools: B left pool p');
  t.same(pools.q.endpoints.map((e) => e.endpoint), [C], '/debug/pools: pool q is there');

  // the stream on the removed endpoint completes whole
  held.shift()!();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  t.match(text, /tok9 /, 'every event arrived');
  t.ok(text.endsWith('data: [DONE]\n\n'), 'the stream ended with [DONE]');
  t.notMatch(text, /"error"/, 'no error event');
  await until(async () => !(await scrape(gw.adminUrl)).some((x) => x.labels.endpoint === B.endpoint), 20_000, 'B\'s series dropped once its stream ended');
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_config_reloads_total', { result: 'success' }), 1);
  t.equal(metric(m, 'infergate_config_reloads_total', { result: 'error' }), 0);
  const line = await until(() => gw.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('config reloaded')), 20_000, 'the reload logged');
  t.match(line, { trigger: 'SIGHUP', generation: 2 }, 'the log says what triggered the reload');
  t.ok((line?.changed as string[]).includes('pools.q'), `changed: ${JSON.stringify(line?.changed)}`);
});

t.test('a broken file (YAML, then schema) changes nothing: logged with its line, counted as error', async (t) => {
  const cfg = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }]);
  const gw = await serve(t, cfg);
  t.equal((await ask(gw.url, 'test-model')).status, 200);

  // a YAML error: a key given twice, on a known line (the valid part adds a model, which must not appear)
  const valid = stringify({ ...cfg, models: [{ name: 'test-model', pool: 'p' }, { name: 'new-model', pool: 'p' }] });
  const dupLine = valid.split('\n').length; // the appended "listen:" lands on this line
  gw.write(`${valid}listen:\n  port: 1\n`);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('error')) === 1, 20_000, 'reloads_total{result="error"} 1');
  // the counter moves before the log line has come through the pipe
  const yamlLog = await until(() => gw.logs().find((l) => l.level === 50 && String(l.msg).includes('Map keys must be unique')), 20_000, 'the YAML problem logged');
  t.ok(yamlLog, 'the YAML problem is logged');
  t.equal(yamlLog?.line, dupLine, 'with its line');
  t.match(String(yamlLog?.msg), new RegExp(`gateway\\.yaml:${dupLine}: `), 'the message says FILE:LINE');
  t.match(String(yamlLog?.msg), /nothing changed/);

  // a schema error: a policy that does not exist
  const bad = stringify(config({ p: [A] }, [{ name: 'test-model', pool: 'p' }, { name: 'new-model', pool: 'p' }]));
  const badText = bad.replace('policy: round_robin', 'policy: fastest');
  const policyLine = badText.split('\n').findIndex((l) => l.includes('policy: fastest')) + 1;
  gw.write(badText);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('error')) === 2, 20_000, 'reloads_total{result="error"} 2');
  const schemaLog = await until(() => gw.logs().find((l) => l.level === 50 && l.key === 'pools.p.policy'), 20_000, 'the schema problem logged');
  t.ok(schemaLog, 'the schema problem is logged with its key');
  t.equal(schemaLog?.line, policyLine, 'and its line');

  // nothing changed: the old model is served, the new one is not known
  const r = await ask(gw.url, 'test-model');
  t.equal(r.status, 200, 'the old model still answers');
  t.equal(r.endpoint, A);
  t.equal((await ask(gw.url, 'new-model')).status, 404, 'the broken file\'s model was not applied');
  t.equal(await gw.reloads('success'), 0);
  const pools = await debugPools(gw);
  t.equal(pools.p.policy, 'round_robin');
  t.equal(gw.proc.child.exitCode, null, 'the gateway runs on');
});

t.test('a file change without a signal reloads (replaced by rename, then written in place)', async (t) => {
  const base = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }]);
  const watched = { ...base, admin: { host: '127.0.0.1', port: 0, watch_config: true } };
  const gw = await serve(t, watched);
  await gw.proc.waitFor(/watching the config file/, 20_000);
  const alias = (name: string) => ({ name, targets: [{ model: 'test-model', weight: 1 }] });
  t.equal((await ask(gw.url, 'second')).status, 404, 'not a model yet');
  gw.write({ ...watched, models: [{ name: 'test-model', pool: 'p' }, alias('second')] });
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'a reload after the rename');
  const second = await ask(gw.url, 'second');
  t.equal(second.status, 200, 'the model added by the renamed file answers');
  t.equal(second.endpoint, A);
  writeFileSync(gw.file, stringify({ ...watched, models: [{ name: 'test-model', pool: 'p' }, alias('third')] }));
  await until(async () => (await gw.reloads('success')) === 2, 20_000, 'a reload after the write in place');
  // the counter moves before the log line has come through the pipe
  const line = await until(
    () => gw.logs().find((l) => String(l.msg).startsWith('config reloaded') && l.generation === 3),
    20_000,
    'the reload after the write in place logged',
  );
  t.match(line, { trigger: 'file change', generation: 3 });
  const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  t.same(models.data.map((m) => m.id).sort(), ['test-model', 'third']);
});

t.test('a Kubernetes ConfigMap update (a ..data symlink swapped) reloads', async (t) => {
  const dir = tempDir();
  const write = (version: string, cfg: Cfg) => {
    mkdirSync(join(dir, version));
    writeFileSync(join(dir, version, 'gateway.yaml'), stringify(cfg));
    symlinkSync(version, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  const watched = (models: unknown[]) => ({ ...config({ p: [A] }, models), admin: { host: '127.0.0.1', port: 0, watch_config: true } });
  write('..v1', watched([{ name: 'test-model', pool: 'p' }]));
  symlinkSync('..data/gateway.yaml', join(dir, 'gateway.yaml'));
  const gw = await serve(t, null, { file: join(dir, 'gateway.yaml') });
  await gw.proc.waitFor(/watching the config file/, 20_000);
  write('..v2', watched([{ name: 'test-model', pool: 'p' }, { name: 'cm-model', pool: 'p' }]));
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'a reload after the swap');
  const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  t.same(models.data.map((m) => m.id).sort(), ['cm-model', 'test-model']);
});

t.test('a config that is a symlink: an edit of its target beside it reloads', async (t) => {
  const dir = tempDir();
  const watched = (models: unknown[]) => ({ ...config({ p: [A] }, models), admin: { host: '127.0.0.1', port: 0, watch_config: true } });
  writeFileSync(join(dir, 'real.yaml'), stringify(watched([{ name: 'test-model', pool: 'p' }])));
  symlinkSync('real.yaml', join(dir, 'gateway.yaml'));
  const gw = await serve(t, null, { file: join(dir, 'gateway.yaml') });
  await gw.proc.waitFor(/watching the config file/, 20_000);
  writeFileSync(join(dir, 'real.yaml'), stringify(watched([{ name: 'test-model', pool: 'p' }, { name: 'linked', targets: [{ model: 'test-model', weight: 1 }] }])));
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'a reload after the target changed');
  t.equal((await ask(gw.url, 'linked')).status, 200);
});

t.test('a listener change needs a restart: reported with its key, the rest applied, the old port serves', async (t) => {
  const cfg = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }]);
  const gw = await serve(t, cfg);
  gw.write({ ...cfg, listen: { host: '127.0.0.1', port: 1 }, models: [{ name: 'test-model', pool: 'p' }, { name: 'other-model', pool: 'q' }], pools: { ...(cfg.pools as Cfg), q: { endpoints: [C] } } });
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('needs_restart')) === 1, 20_000, 'reloads_total{result="needs_restart"} 1');
  t.equal(await gw.reloads('success'), 0, 'one count per reload');
  const warn = await until(() => gw.logs().find((l) => String(l.msg).includes('needs restart')), 20_000, 'the needs-restart warning logged');
  t.same(warn?.keys, ['listen.port'], 'the key is named');
  t.match(String(warn?.msg), /listen\.port/);
  const r = await ask(gw.url, 'other-model');
  t.equal(r.status, 200, 'the new model is applied, on the port the gateway listens on');
  t.equal(r.endpoint, C);
});

t.test('alias weights and a pool\'s policy change at once; the prefix index of a kept endpoint survives', async (t) => {
  const pools = { p: [A], q: [C] };
  const models = (wTest: number, wOther: number) => [
    { name: 'test-model', pool: 'p' },
    { name: 'other-model', pool: 'q' },
    { name: 'alias', targets: [{ model: 'test-model', weight: wTest }, { model: 'other-model', weight: wOther }] },
  ];
  const gw = await serve(t, config(pools, models(1, 0)));
  const long = { messages: [{ role: 'user', content: longText('reload', 4000) }] };
  for (let i = 0; i < 3; i++) {
    const r = await ask(gw.url, 'alias', long);
    t.equal(r.endpoint, A, 'weight 1 / 0: the alias goes to test-model');
  }
  const before = await debugPools(gw);
  const blocksBefore = before.p.endpoints[0].index_blocks;
  t.ok(blocksBefore > 0, `A holds ${blocksBefore} prefix blocks`);

  const next = config(pools, models(0, 1));
  (next.pools as Record<string, Cfg>).p.policy = 'least_request';
  gw.write(next);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'the reload');
  const after = await debugPools(gw);
  t.equal(after.p.policy, 'least_request', '/debug/pools shows the new policy');
  t.equal(after.p.endpoints[0].index_blocks, blocksBefore, 'the kept endpoint keeps its prefix index');
  for (let i = 0; i < 3; i++) {
    const r = await ask(gw.url, 'alias');
    t.equal(r.endpoint, C, 'weight 0 / 1: the alias goes to other-model');
  }
  const d = (await (await fetch(`${gw.adminUrl}/debug/decisions?n=1`)).json()) as { decisions: Array<Record<string, unknown>> };
  const last = d.decisions[0];
  t.match(last, { pool: 'q', model: 'other-model' }, '/debug/decisions shows the alias resolved to the new target');
});

t.test('a key the new config names that cannot be read: nothing changes, the key is named', async (t) => {
  const cfg = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }]);
  const gw = await serve(t, cfg);
  const next = config({ p: [A], q: [C] }, [{ name: 'test-model', pool: 'p' }, { name: 'other-model', pool: 'q' }]);
  (next.pools as Record<string, Cfg>).q.api_key_env = 'INFERGATE_RELOAD_TEST_UNSET';
  gw.write(next);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('error')) === 1, 20_000, 'reloads_total{result="error"} 1');
  const line = await until(() => gw.logs().find((l) => l.level === 50 && String(l.msg).includes('INFERGATE_RELOAD_TEST_UNSET')), 20_000, 'the unreadable key logged');
  t.match(String(line?.msg), /pools\.q\.api_key/, 'the log names the key');
  t.equal((await ask(gw.url, 'other-model')).status, 404, 'the pool was not added');
  t.equal((await ask(gw.url, 'test-model')).status, 200);
});

t.test('tenant limits reload: a tenant held to 1 request a minute gets more at once', async (t) => {
  const cfg = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }], { tenants: { default: { requests_per_minute: 1 } } });
  const gw = await serve(t, cfg);
  t.equal((await ask(gw.url, 'test-model')).status, 200);
  const refused = await ask(gw.url, 'test-model');
  t.equal(refused.status, 429, 'the second request in the minute is refused');
  gw.write({ ...cfg, tenants: { default: { requests_per_minute: 1000 } } });
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'the reload');
  const first = await ask(gw.url, 'test-model');
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '1000', 'the next answer is under the new limit');
  // the bucket keeps its level (a reload grants no fresh burst) and refills at the new pace: 1000/min
  const r = await until(async () => {
    const x = await ask(gw.url, 'test-model');
    return x.status === 200 ? x : undefined;
  }, 20_000, 'a request admitted under the new limit');
  t.equal(r?.headers.get('x-ratelimit-limit-requests'), '1000');
});

/** Sends a request, then makes the gateway log an error (a broken file), and returns the log lines up to it. */
async function logsAfterOneRequest(t: Test, gw: Served, errorsBefore: number): Promise<Array<Record<string, unknown>>> {
  const errorLines = () => gw.logs().filter((l) => l.level === 50).length;
  const linesBefore = errorLines();
  t.equal((await ask(gw.url, 'test-model')).status, 200);
  gw.write('models: [\n');
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('error')) === errorsBefore + 1, 20_000, 'the error reload');
  await until(() => errorLines() > linesBefore, 20_000, 'the error log line');
  const logs = gw.logs();
  let last = logs.length - 1;
  while (last >= 0 && logs[last].level !== 50) last--;
  return logs.slice(0, last + 1);
}

t.test('logging.level applies at once; LOG_LEVEL, when set, wins on reload as at start', async (t) => {
  const cfg = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }], { logging: { level: 'warn', access_log: false } });
  const debug = { ...cfg, logging: { level: 'debug', access_log: false } };
  const gw = await serve(t, cfg);
  t.notOk((await logsAfterOneRequest(t, gw, 0)).some((l) => l.msg === 'pick'), 'at warn: no pick line');
  gw.write(debug);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'the reload');
  t.ok((await logsAfterOneRequest(t, gw, 1)).some((l) => l.msg === 'pick'), 'at debug after the reload: the pick is logged');

  const env = await serve(t, cfg, { env: { LOG_LEVEL: 'warn' } });
  env.write(debug);
  env.proc.child.kill('SIGHUP');
  await until(async () => (await env.reloads('success')) === 1, 20_000, 'the reload');
  t.notOk((await logsAfterOneRequest(t, env, 0)).some((l) => l.msg === 'pick'), 'LOG_LEVEL=warn: still no pick line');
});

t.test('auth reloads: none → jwt (the demo\'s key set) asks for tokens at once, and back', async (t) => {
  const mint = runCli(['token', '--sub', 'reloader', '--models', '*', '--ttl', '10m']); // makes the dev key pair if none yet
  t.equal(await mint.exited(20_000), 0, mint.stderr());
  const token = mint.stdout().trim();
  const jwt = (parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as { auth: { jwt: Record<string, unknown> } }).auth.jwt;
  jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');
  const open = config({ p: [A] }, [{ name: 'test-model', pool: 'p' }]);
  const gw = await serve(t, open);
  t.equal((await ask(gw.url, 'test-model')).status, 200, 'auth none: no token needed');
  gw.write({ ...open, auth: { mode: 'jwt', jwt } });
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 1, 20_000, 'the reload to jwt');
  t.equal((await ask(gw.url, 'test-model')).status, 401, 'no token: 401');
  const withToken = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
  });
  t.equal(withToken.status, 200, 'a valid token: 200');
  await withToken.text();
  t.equal(metric(await scrape(gw.adminUrl), 'infergate_auth_disabled'), 0);
  gw.write(open);
  gw.proc.child.kill('SIGHUP');
  await until(async () => (await gw.reloads('success')) === 2, 20_000, 'the reload back to none');
  t.equal((await ask(gw.url, 'test-model')).status, 200, 'auth none again');
  t.equal(metric(await scrape(gw.adminUrl), 'infergate_auth_disabled'), 1);
});
