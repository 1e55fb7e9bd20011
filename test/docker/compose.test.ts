// docker/compose.yaml holds together without running it (the Prometheus and Grafana images cannot be
// pulled here): every service has an image or a build whose context and Dockerfile exist, every mounted
// host file exists, published host ports are unique, the long-running services have healthchecks, and
// Prometheus scrapes services and ports that the compose file (and the gateway's config) really have.
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../helpers/process.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const DIR = join(ROOT, 'docker');
const COMPOSE = join(DIR, 'compose.yaml');
// compose's own interpolation, for the forms used here: ${VAR:-default} and ${VAR} (taken unset)
const interpolate = (s: string) => s.replace(/\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}/g, (_, _name: string, def?: string) => def ?? '');
const deep = (v: unknown): unknown =>
  typeof v === 'string' ? interpolate(v) : Array.isArray(v) ? v.map(deep) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deep(x)])) : v;

const compose = deep(parse(readFileSync(COMPOSE, 'utf8'), { merge: true })) as Obj;
const services = compose.services as Record<string, Obj>;
const hostPath = (p: string) => (isAbsolute(p) ? p : resolve(dirname(COMPOSE), p));

/** "HOST:CONTAINER[:ro]" volumes of a service that mount a host path (./ or ../ or /) */
function binds(svc: Obj): Array<{ host: string; container: string }> {
  return ((svc.volumes ?? []) as Array<string | Obj>).flatMap((v) => {
    if (typeof v !== 'string') return v.type === 'bind' ? [{ host: v.source as string, container: v.target as string }] : [];
    const [host, container] = v.split(':');
    return /^[./]/.test(host) ? [{ host, container }] : [];
  });
}

/** "[IP:]HOST:CONTAINER" → { host, container } */
function published(p: string | Obj): { host: string; container: number } {
  if (typeof p !== 'string') return { host: `${p.host_ip ?? ''}:${p.published}`, container: Number(p.target) };
  const parts = p.split(':');
  const container = Number(parts.pop());
  return { host: parts.length === 2 ? `${parts[0]}:${parts[1]}` : `:${parts[0]}`, container };
}

t.test('the file parses and names the gateway, three mocks, Prometheus and Grafana', async (t) => {
  t.same(Object.keys(services).sort(), ['gateway', 'grafana', 'prometheus', 'vllm-1', 'vllm-2', 'vllm-3']);
});

t.test('every service has an image or a build whose context and Dockerfile exist', async (t) => {
  for (const [name, svc] of Object.entries(services)) {
    t.ok(svc.image || svc.build, `${name}: image or build`);
    if (svc.image) t.match(svc.image, /^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?$/, `${name}: an image reference (${svc.image})`);
    if (svc.build) {
      const context = hostPath(typeof svc.build === 'string' ? svc.build : svc.build.context);
      t.ok(existsSync(context) && statSync(context).isDirectory(), `${name}: build context ${context} exists`);
      const dockerfile = join(context, svc.build.dockerfile ?? 'Dockerfile');
      t.ok(existsSync(dockerfile), `${name}: ${dockerfile} exists`);
    }
  }
});

t.test('every mounted host file exists, and the dashboard is mounted where the provisioning looks', async (t) => {
  for (const [name, svc] of Object.entries(services)) {
    for (const b of binds(svc)) t.ok(existsSync(hostPath(b.host)), `${name}: ${b.host} exists`);
  }
  const grafana = binds(services.grafana);
  const mountOf = (file: string) => grafana.find((b) => hostPath(b.host) === join(DIR, file));
  const dashboards = mountOf('grafana/provisioning/dashboards.yaml');
  const datasources = mountOf('grafana/provisioning/datasources.yaml');
  const dashboard = mountOf('grafana/infergate-dashboard.json');
  t.match(dashboards?.container ?? '', /^\/etc\/grafana\/provisioning\/dashboards\/[^/]+\.ya?ml$/, 'dashboard provider in Grafana\'s provisioning folder');
  t.match(datasources?.container ?? '', /^\/etc\/grafana\/provisioning\/datasources\/[^/]+\.ya?ml$/, 'data source in Grafana\'s provisioning folder');
  const provider = (parse(readFileSync(join(DIR, 'grafana/provisioning/dashboards.yaml'), 'utf8')) as Obj).providers[0];
  t.equal(provider.type, 'file');
  t.equal(dirname(dashboard?.container ?? ''), provider.options.path, 'the dashboard file is in the folder the provider reads');
  const json = JSON.parse(readFileSync(join(DIR, 'grafana/infergate-dashboard.json'), 'utf8')) as Obj;
  t.equal(json.uid, 'infergate', 'the provisioned file is the infergate dashboard');
  t.equal(services.grafana.environment.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH, dashboard?.container, 'and it is the home dashboard');
});

t.test('Grafana\'s data source is the compose file\'s Prometheus, of the type the dashboard asks for', async (t) => {
  const ds = (parse(readFileSync(join(DIR, 'grafana/provisioning/datasources.yaml'), 'utf8')) as Obj).datasources as Obj[];
  t.equal(ds.length, 1);
  const json = JSON.parse(readFileSync(join(DIR, 'grafana/infergate-dashboard.json'), 'utf8')) as Obj;
  const variable = (json.templating.list as Obj[]).find((v) => v.type === 'datasource');
  t.equal(ds[0].type, variable?.query, 'the dashboard\'s $datasource variable lists this type');
  t.equal(ds[0].isDefault, true);
  const url = new URL(ds[0].url);
  t.ok(services[url.hostname], `${url.hostname} is a service`);
  const promPort = Number(url.port);
  t.ok(services.prometheus.ports.map(published).some((p: { container: number }) => p.container === promPort), `Prometheus listens on ${promPort}`);
  t.same(services.grafana.depends_on.prometheus, { condition: 'service_healthy' });
});

t.test('published host ports are unique; Prometheus and Grafana only on loopback', async (t) => {
  const seen = new Map<string, string>();
  for (const [name, svc] of Object.entries(services)) {
    for (const p of (svc.ports ?? []) as Array<string | Obj>) {
      const port = published(p).host.split(':').pop()!;
      t.notOk(seen.has(port), `${name}: host port ${port} is not also ${seen.get(port) ?? 'taken'}`);
      seen.set(port, name);
    }
  }
  t.ok(seen.size >= 4, `${seen.size} ports published`);
  for (const name of ['prometheus', 'grafana']) t.ok(services[name].ports.every((p: string) => p.startsWith('127.0.0.1:')), `${name} on 127.0.0.1 only`);
});

t.test('every long-running service has a healthcheck, and the gateway waits for healthy mocks', async (t) => {
  for (const [name, svc] of Object.entries(services)) {
    const test = svc.healthcheck?.test as string[] | undefined;
    t.ok(Array.isArray(test) && test[0] === 'CMD' && test.length > 1, `${name}: healthcheck ${JSON.stringify(test)}`);
  }
  for (const name of ['vllm-1', 'vllm-2', 'vllm-3']) t.same(services.gateway.depends_on[name], { condition: 'service_healthy' });
  t.match(services.prometheus.healthcheck.test.at(-1), /^http:\/\/127\.0\.0\.1:9090\/-\/(ready|healthy)$/);
  t.match(services.grafana.healthcheck.test.at(-1), /^http:\/\/127\.0\.0\.1:3000\/api\/health$/);
});

t.test('Prometheus scrapes services and ports that exist: the gateway\'s admin port, each mock\'s --port', async (t) => {
  const mount = binds(services.prometheus).find((b) => b.container === '/etc/prometheus/prometheus.yml');
  t.ok(mount, 'prometheus.yml is mounted where the command says');
  t.ok((services.prometheus.command as string[]).includes('--config.file=/etc/prometheus/prometheus.yml'));
  const prom = parse(readFileSync(hostPath(mount!.host), 'utf8')) as Obj;
  const gatewayConfig = parse(readFileSync(join(DIR, 'gateway.yaml'), 'utf8')) as Obj;
  const targets = (prom.scrape_configs as Obj[]).flatMap((job) =>
    (job.static_configs as Obj[]).flatMap((sc) => (sc.targets as string[]).map((target) => ({ job: job.job_name as string, path: job.metrics_path ?? '/metrics', target }))),
  );
  const scraped = new Set<string>();
  for (const { job, path, target } of targets) {
    const [host, portText] = target.split(':');
    const port = Number(portText);
    const svc = services[host];
    t.ok(svc, `${job}: ${host} is a compose service`);
    if (!svc) continue;
    scraped.add(host);
    t.equal(path, '/metrics', `${job}: /metrics`);
    if (host === 'gateway') {
      t.equal(port, gatewayConfig.admin.port, `${job}: ${target} is the image config's admin port`);
      t.equal(gatewayConfig.admin.host, '0.0.0.0', 'whose listener other containers reach');
    } else {
      const cmd = svc.command as string[];
      t.equal(cmd[0], 'mock', `${host} runs a mock server`);
      t.equal(port, Number(cmd[cmd.indexOf('--port') + 1]), `${job}: ${target} is the mock's --port`);
      t.equal(cmd[cmd.indexOf('--host') + 1], '0.0.0.0', `${host} listens beyond loopback`);
    }
  }
  t.same([...scraped].sort(), ['gateway', 'vllm-1', 'vllm-2', 'vllm-3'], 'the gateway and every mock are scraped');
});

// docker-compose (1.29, Debian's) validates the file against its schema, offline; skipped where absent.
const composeCli = (() => {
  try {
    execFileSync('docker-compose', ['version'], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
})();
t.test('docker-compose config accepts the file', { skip: composeCli ? false : 'docker-compose is not installed' }, async (t) => {
  const r = spawnSync('docker-compose', ['-f', COMPOSE, 'config', '-q'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, r.stderr);
});
