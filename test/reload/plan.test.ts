// What a reload applies and what needs a restart (src/config/reload-plan.ts), on configs parsed as the
// gateway parses them.
import t from 'tap';
import { stringify } from 'yaml';
import { parseConfigText } from '../../src/config/load.js';
import { planReload } from '../../src/config/reload-plan.js';
import type { Config } from '../../src/config/schema.js';

function cfg(over: Record<string, unknown> = {}): Config {
  const r = parseConfigText(
    stringify({
      listen: { host: '127.0.0.1', port: 8080 },
      auth: { mode: 'none', allow_unauthenticated: true },
      models: [{ name: 'm', pool: 'p' }],
      pools: { p: { endpoints: ['10.0.0.1:8000', '10.0.0.2:8000'] } },
      ...over,
    }),
  );
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

t.test('the same config: nothing to restart, nothing changed', async (t) => {
  t.same(planReload(cfg(), cfg()), { config: cfg(), needsRestart: [], changed: [] });
});

t.test('listener, TLS, front limits and quota store need a restart and keep their running values', async (t) => {
  const running = cfg();
  const next = cfg({
    listen: { host: '0.0.0.0', port: 9000, tls: { cert: 'c.pem', key: 'k.pem' } },
    admin: { port: 9999 },
    limits: { max_body_bytes: '1mb', retries: 3 },
    quota: { backend: 'redis', redis: { url: 'redis://127.0.0.1:6379' } },
  });
  const plan = planReload(running, next);
  t.same(plan.needsRestart, ['listen.host', 'listen.port', 'listen.tls', 'admin.port', 'limits.max_body_bytes', 'quota']);
  t.same(plan.config.listen, running.listen, 'the running listener stays');
  t.equal(plan.config.admin.port, running.admin.port);
  t.equal(plan.config.limits.max_body_bytes, running.limits.max_body_bytes);
  t.same(plan.config.quota, running.quota);
  t.equal(plan.config.limits.retries, 3, 'a live limit is applied');
  t.same(plan.changed, ['limits']);
  t.equal(next.listen.port, 9000, 'the new config itself is not modified');
});

t.test('pools and models are named one by one', async (t) => {
  const next = cfg({
    models: [{ name: 'm', pool: 'p' }, { name: 'n', pool: 'q' }],
    pools: { p: { endpoints: ['10.0.0.1:8000'] }, q: { endpoints: ['10.0.0.3:8000'] } },
    logging: { level: 'debug' },
  });
  const plan = planReload(cfg(), next);
  t.same(plan.needsRestart, []);
  t.same(plan.changed.sort(), ['logging', 'models.n', 'pools.p', 'pools.q']);
  t.equal(plan.config.logging.level, 'debug');
});

t.test('TLS file paths: a changed path needs a restart, the same paths do not', async (t) => {
  const tls = (cert: string) => cfg({ listen: { host: '127.0.0.1', port: 8080, tls: { cert, key: 'k.pem' } } });
  t.same(planReload(tls('a.pem'), tls('a.pem')).needsRestart, []);
  t.same(planReload(tls('a.pem'), tls('b.pem')).needsRestart, ['listen.tls']);
  t.same(planReload(tls('a.pem'), cfg()).needsRestart, ['listen.tls'], 'TLS removed');
  t.same(planReload(tls('a.pem'), cfg()).config.listen.tls, { cert: 'a.pem', key: 'k.pem', watch: true });
});
