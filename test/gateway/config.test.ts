// check-config and serve on good and bad files: exit codes, and each problem named with its path and line.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { runCli, tempDir, ROOT, startGateway, gatewayConfig } from '../helpers/process.js';
import { onFreePorts } from '../e2e/support.js';

const dir = tempDir();
function file(name: string, text: string): string {
  const f = join(dir, name);
  writeFileSync(f, text);
  return f;
}

t.test('the shipped example configs are valid', async (t) => {
  // config/demo.yaml names the dev key set that `demo` and `token` make on first use (a fresh clone has none)
  const { ensureDevKey } = await import('../../src/auth/dev-keys.js');
  await ensureDevKey();
  for (const f of ['config/demo.yaml', 'config/gateway.yaml', 'docker/gateway.yaml']) {
    const p = runCli(['check-config', join(ROOT, f)]);
    t.equal(await p.exited(), 0, `${f}: ${p.stderr()}`);
    t.equal(p.stdout(), 'ok\n');
  }
});

t.test('problems are reported with key path and line, exit 1', async (t) => {
  const bad = file(
    'bad.yaml',
    [
      'listen:',
      '  port: 8080',
      'auth:',
      '  mode: none',
      'limits:',
      '  max_body_bytes: lots',
      'models:',
      '  - name: a',
      '    pool: missing',
      'pools:',
      '  p:',
      '    endpoints: [127.0.0.1:8001]',
      '    metrics:',
      '      interval: soon',
      '    polcy: scored',
    ].join('\n'),
  );
  const p = runCli(['check-config', bad]);
  t.equal(await p.exited(), 1);
  const err = p.stderr();
  t.match(err, /bad\.yaml:3: auth\.allow_unauthenticated: .*allow_unauthenticated: true/, "mode none without allow_unauthenticated, at the auth block");
  t.match(err, /bad\.yaml:6: limits\.max_body_bytes: not a size/);
  t.match(err, /bad\.yaml:9: models\.0\.pool: pool "missing" is not defined/);
  t.match(err, /bad\.yaml:14: pools\.p\.metrics\.interval: not a duration/);
  t.match(err, /bad\.yaml:15: pools\.p\.polcy: /, 'unknown key named at its own line');
});

t.test('auth.mode has no default; jwt needs its keys, issuer, audience and algorithms', async (t) => {
  const noMode = file('nomode.yaml', 'auth: {}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n');
  const p = runCli(['check-config', noMode]);
  t.equal(await p.exited(), 1);
  t.match(p.stderr(), /auth\.mode/);
  const jwt = file('jwt.yaml', 'auth: {mode: jwt}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n');
  const q = runCli(['check-config', jwt]);
  t.equal(await q.exited(), 1);
  t.match(q.stderr(), /jwt\.yaml:1: auth\.jwt: .*needs an auth\.jwt section/);
});

t.test('YAML syntax errors and unreadable files', async (t) => {
  const broken = file('broken.yaml', 'listen:\n  port: [1, 2\nmodels: x\n');
  const p = runCli(['check-config', broken]);
  t.equal(await p.exited(), 1);
  t.match(p.stderr(), /broken\.yaml:\d+: YAML: /);
  const q = runCli(['check-config', join(dir, 'nope.yaml')]);
  t.equal(await q.exited(), 1);
  t.match(q.stderr(), /cannot read the file: ENOENT/);
});

t.test('serve exits 1 on a bad config before listening', async (t) => {
  const bad = file('bad2.yaml', 'auth: {mode: none}\nmodels: []\npools: {}\n');
  const p = runCli(['serve', '--config', bad]);
  t.equal(await p.exited(), 1);
  t.notMatch(p.stdout(), /listening/);
  t.match(p.stderr(), /models: at least one model/);
});

t.test('a port another gateway or mock already holds is refused, not shared', async (t) => {
  // uWS would share a port between processes (SO_REUSEPORT, set for any port but 0) unless told not to.
  let port = 0;
  const first = await onFreePorts(1, (base) => {
    port = base;
    return startGateway(gatewayConfig(['127.0.0.1:9'], { over: { listen: { host: '127.0.0.1', port } } }));
  });
  t.teardown(() => first.stop());
  const second = runCli(['serve', '--config', file('same-port.yaml', stringify(gatewayConfig(['127.0.0.1:9'], { over: { listen: { host: '127.0.0.1', port } } })))]);
  t.equal(await second.exited(), 1, 'the second gateway exits 1');
  t.notMatch(second.stdout(), /listening/);
  t.match(second.stderr(), new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(in use`));
  const mock = runCli(['mock', '--port', String(port), '--model', 'm']);
  t.equal(await mock.exited(), 1, 'so does a mock');
  t.match(mock.stderr(), new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}`));
});

t.test('schema prints a JSON Schema; --help and unknown commands', async (t) => {
  const p = runCli(['schema']);
  t.equal(await p.exited(), 0);
  const schema = JSON.parse(p.stdout()) as { properties: Record<string, unknown> };
  t.ok(schema.properties.pools && schema.properties.auth && schema.properties.listen);
  const h = runCli(['--help']);
  t.equal(await h.exited(), 0);
  t.match(h.stdout(), /serve --config FILE/);
  const u = runCli(['frobnicate']);
  t.equal(await u.exited(), 2);
  t.match(u.stderr(), /unknown command/);
});

t.test('a duration without its unit is refused, naming the key and the fix', async (t) => {
  const f = file(
    'bare-duration.yaml',
    [
      'auth: { mode: none, allow_unauthenticated: true }',
      'limits:',
      '  request_timeout: 600',
      '  first_byte_timeout: "10"',
      'models: [{ name: m, pool: p }]',
      'pools:',
      '  p:',
      '    endpoints: [127.0.0.1:8001]',
      '    metrics: { interval: 2x }',
      '    saturation: { retry_after: 5 }',
    ].join('\n'),
  );
  const p = runCli(['check-config', f]);
  t.equal(await p.exited(), 1);
  const err = p.stderr();
  t.match(err, /bare-duration\.yaml:3: limits\.request_timeout: a duration needs a unit: write "600s" for seconds or "600ms" for milliseconds/);
  t.match(err, /:4: limits\.first_byte_timeout: a duration needs a unit: write "10s"/, 'a quoted bare number too');
  t.match(err, /:9: pools\.p\.metrics\.interval: not a duration: "2x"/);
  t.match(err, /:10: pools\.p\.saturation\.retry_after: a duration needs a unit: write "5s"/);
  const schema = runCli(['schema']);
  t.equal(await schema.exited(), 0);
  const s = JSON.parse(schema.stdout());
  t.match(s.properties.limits.properties.request_timeout, { type: 'string', pattern: /ms\|s\|m\|h/ }, 'editors see the pattern');
});

t.test('files the config names must be readable; dangerous settings are warnings', async (t) => {
  const f = file(
    'files.yaml',
    [
      'listen:',
      '  port: 8080',
      `  tls: { cert: ${join(dir, 'missing-cert.pem')}, key: ${dir} }`,
      'auth: { mode: none, allow_unauthenticated: true }',
      'limits: { response_timeout: 5s, drain_timeout: 20s }',
      'models: [{ name: m, pool: p }]',
      'pools:',
      '  p: { endpoints: [127.0.0.1:8001], metrics: { interval: 1s, stale_after: 1s }, queue: { max_length: 5, max_wait: 20m } }',
    ].join('\n'),
  );
  const p = runCli(['check-config', f]);
  t.equal(await p.exited(), 1, 'a missing certificate fails the check');
  t.match(p.stderr(), /files\.yaml:3: listen\.tls\.cert: .*missing-cert\.pem: does not exist/);
  t.match(p.stderr(), /files\.yaml:3: listen\.tls\.key: .*: is a directory, not a file/);
  const s = runCli(['serve', '--config', f]);
  t.equal(await s.exited(), 1, 'serve refuses to start on it too');
  t.match(s.stderr(), /listen\.tls\.cert: .*does not exist/);

  const w = file('warn.yaml', readFileSync(f, 'utf8').replace(/\n  tls: .*\n/, '\n'));
  const c = runCli(['check-config', w]);
  t.equal(await c.exited(), 0, 'warnings do not fail the check');
  t.equal(c.stdout(), 'ok\n');
  t.match(c.stderr(), /warn\.yaml:4: warning: limits\.drain_timeout: 20s is longer than the 10s a container gets/);
  t.match(c.stderr(), /warn\.yaml:4: warning: limits\.response_timeout: 5s: a non-streamed answer/);
  t.match(c.stderr(), /warn\.yaml:7: warning: pools\.p\.metrics\.stale_after: 1s is under two scrape intervals/);
  t.match(c.stderr(), /warn\.yaml:7: warning: pools\.p\.queue\.max_wait: 1200s is not shorter than request_timeout \(600s\)/);
});
