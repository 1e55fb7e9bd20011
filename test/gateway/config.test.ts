// check-config and serve on good and bad files: exit codes, and each problem named with its path and line.
import t from 'tap';
import { writeFileSync } from 'node:fs';
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

t.test('auth.mode has no default; jwt is not available yet', async (t) => {
  const noMode = file('nomode.yaml', 'auth: {}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n');
  const p = runCli(['check-config', noMode]);
  t.equal(await p.exited(), 1);
  t.match(p.stderr(), /auth\.mode/);
  const jwt = file('jwt.yaml', 'auth: {mode: jwt}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n');
  const q = runCli(['check-config', jwt]);
  t.equal(await q.exited(), 1);
  t.match(q.stderr(), /jwt\.yaml:1: auth\.mode: .*not available/);
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
