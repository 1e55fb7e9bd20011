// The quota: and tenants: keys as a user writes them: check-config names each mistake with its line,
// and `infergate schema` shows the keys.
import t from 'tap';
import { runCli, tempDir } from '../helpers/process.js';
import { checkConfigText } from '../helpers/check-config.js';

const dir = tempDir();
const BASE = 'auth: {mode: none, allow_unauthenticated: true}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n';

const check = (name: string, text: string) => checkConfigText(dir, name, text);

t.test('a shared quota on Redis with every key', async (t) => {
  const r = await check(
    'good.yaml',
    BASE +
      'tenants:\n  default: {requests_per_minute: 600, tokens_per_minute: 100000, max_concurrent: 8}\n  overrides: {batch: {max_concurrent: 2, priority: sheddable}}\n' +
      'quota:\n  backend: redis\n  redis: {url: "redis://10.0.0.5:6379/2", key_prefix: "gw:", timeout: 20ms, lease_ttl: 1m}\n  on_backend_error: deny\n',
  );
  t.equal(r.code, 0, r.err);
  t.equal(r.out, 'ok\n');
});

t.test('quota mistakes are named with their line', async (t) => {
  const r = await check(
    'bad.yaml',
    BASE +
      [
        'tenants:',
        '  default:',
        '    max_concurrent: 0',
        '    requests_per_minute: 0',
        'quota:',
        '  backend: redis',
        '  redis:',
        '    timeout: soon',
        '    lease_ttl: 1s',
        '  on_backend_error: ignore',
      ].join('\n'),
  );
  t.equal(r.code, 1);
  t.match(r.err, /bad\.yaml:6: tenants\.default\.max_concurrent: /);
  t.match(r.err, /bad\.yaml:7: tenants\.default\.requests_per_minute: /);
  t.match(r.err, /bad\.yaml:10: quota\.redis: .*quota\.redis\.url|quota\.redis\.url: .*needs quota\.redis\.url/);
  t.match(r.err, /bad\.yaml:11: quota\.redis\.timeout: not a duration/);
  t.match(r.err, /quota\.redis\.lease_ttl: .*at least 3s/);
  t.match(r.err, /bad\.yaml:13: quota\.on_backend_error: /);
  const half = await check('half.yaml', BASE + 'tenants: {default: {max_concurrent: 1.5}}\n');
  t.match(half.err, /tenants\.default\.max_concurrent: .*int/, 'a concurrency is a whole number');
  const url = await check('url.yaml', BASE + 'quota: {backend: redis, redis: {url: "http://x:6379"}}\n');
  t.equal(url.code, 1);
  t.match(url.err, /quota\.redis\.url: a Redis URL/);
});

t.test('the schema shows the quota keys', async (t) => {
  const p = runCli(['schema']);
  t.equal(await p.exited(), 0);
  const schema = JSON.parse(p.stdout());
  const quota = schema.properties.quota.properties;
  t.same(quota.backend.enum, ['memory', 'redis']);
  t.same(quota.on_backend_error.enum, ['allow', 'local', 'deny']);
  t.ok(quota.redis.properties.url && quota.redis.properties.timeout && quota.redis.properties.key_prefix && quota.redis.properties.lease_ttl);
  t.ok(schema.properties.tenants.properties.default.properties.max_concurrent);
});
