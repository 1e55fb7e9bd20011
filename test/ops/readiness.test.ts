// /readyz as a load balancer reads it: 200 only while every configured model (ready_when: all) or at least
// one (any) has a live endpoint; 503 with a body naming the model, its pool and why each endpoint does not
// count. Real mock processes die and come back on the same port; two real gateways watch them.
import t from 'tap';
import { runCli, startGateway, startMocks, scrape, metric, until, type Mocks, type Proc, type RunningGateway } from '../e2e/support.js';

interface ReadyBody {
  status: string;
  ready_when?: string;
  models_not_ready?: Array<{ model: string; missing: Array<{ pool: string; endpoints: Array<{ endpoint: string; why: string }> }> }>;
}

async function readyz(gw: RunningGateway): Promise<{ status: number; body: ReadyBody }> {
  const r = await fetch(`${gw.adminUrl}/readyz`, { signal: AbortSignal.timeout(3_000) });
  return { status: r.status, body: (await r.json()) as ReadyBody };
}

function config(endpoints: [string, string], readyWhen: 'all' | 'any') {
  const pool = (ep: string) => ({ endpoints: [ep], policy: 'round_robin', metrics: { interval: '100ms', stale_after: '500ms' } });
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, ready_when: readyWhen },
    auth: { mode: 'none', allow_unauthenticated: true },
    logging: { level: 'warn', access_log: false },
    models: [
      { name: 'm1', pool: 'p1' },
      { name: 'm2', pool: 'p2' },
    ],
    pools: { p1: pool(endpoints[0]), p2: pool(endpoints[1]) },
  };
}

// each process is stopped at the end even when a later start fails
const m2 = await startMocks(1, ['--model', 'm2']);
t.teardown(() => m2.kill());
let m1: Mocks | { proc: Proc; kill(): Promise<number | null> } = await startMocks(1, ['--model', 'm1']);
t.teardown(() => m1.kill()); // the mock running then (it is restarted below)
const ep1 = (m1 as Mocks).endpoints[0];
const ep2 = m2.endpoints[0];
const gwAll = await startGateway(config([ep1, ep2], 'all'));
t.teardown(() => gwAll.stop());
const gwAny = await startGateway(config([ep1, ep2], 'any'));
t.teardown(() => gwAny.stop());

t.test('both gateways turn ready once every endpoint has been scraped', async (t) => {
  for (const gw of [gwAll, gwAny]) {
    const r = await until(async () => {
      const x = await readyz(gw);
      return x.status === 200 ? x : undefined;
    }, 10_000, '/readyz 200');
    t.equal(r.body.status, 'ready');
    t.equal(metric(await scrape(gw.adminUrl), 'infergate_ready'), 1, 'infergate_ready 1');
  }
});

t.test('a model server dies: ready_when all says 503 naming what is missing, any stays ready', async (t) => {
  await m1.kill();
  const down = await until(async () => {
    const x = await readyz(gwAll);
    return x.status === 503 ? x : undefined;
  }, 10_000, 'ready_when all to answer 503');
  t.equal(down.body.status, 'not ready');
  t.equal(down.body.ready_when, 'all');
  t.same(down.body.models_not_ready?.map((m) => m.model), ['m1'], 'names the model without a live endpoint');
  const miss = down.body.models_not_ready![0].missing[0];
  t.equal(miss.pool, 'p1', 'and its pool');
  t.equal(miss.endpoints[0].endpoint, ep1, 'and the endpoint');
  t.match(miss.endpoints[0].why, /metrics stale/, 'and why it does not count');
  t.equal(metric(await scrape(gwAll.adminUrl), 'infergate_ready'), 0, 'infergate_ready 0');
  t.equal(metric(await scrape(gwAll.adminUrl), 'infergate_model_ready', { model: 'm1' }), 0, 'infergate_model_ready{model="m1"} 0');
  t.equal(metric(await scrape(gwAll.adminUrl), 'infergate_model_ready', { model: 'm2' }), 1, 'm2 still ready');

  // the any-gateway sees the same death (its own state says m1 is not ready) and still answers 200
  await until(async () => {
    const r = await fetch(`${gwAny.adminUrl}/debug/state`);
    const s = (await r.json()) as { models: Array<{ model: string; ready: boolean }> };
    return s.models.find((m) => m.model === 'm1')?.ready === false;
  }, 10_000, 'the any-gateway to see m1 down');
  const any = await readyz(gwAny);
  t.equal(any.status, 200, 'ready_when any: one model is enough');
  t.equal(any.body.ready_when, 'any');
});

t.test('the model server comes back on its port: both gateways ready again', async (t) => {
  const proc = runCli(['mock', '--port', ep1.split(':')[1], '--model', 'm1']);
  m1 = { proc, kill: () => proc.kill() };
  await proc.waitFor(/^mock listening on /m);
  for (const gw of [gwAll, gwAny]) {
    await until(async () => (await readyz(gw)).status === 200, 10_000, '/readyz 200 again');
    t.pass(`${gw === gwAll ? 'all' : 'any'}: ready again`);
  }
});

t.test('every model down: any turns 503 too', async (t) => {
  await Promise.all([m1.kill(), m2.kill()]);
  const down = await until(async () => {
    const x = await readyz(gwAny);
    return x.status === 503 ? x : undefined;
  }, 10_000, 'ready_when any to answer 503');
  t.same(down.body.models_not_ready?.map((m) => m.model).sort(), ['m1', 'm2']);
  t.equal((await fetch(`${gwAny.adminUrl}/healthz`)).status, 200, '/healthz stays 200: the process is alive');
});

t.test('check-config refuses an unknown ready_when and a negative decisions size, naming the key', async (t) => {
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { stringify } = await import('yaml');
  const { tempDir } = await import('../helpers/process.js');
  const file = join(tempDir(), 'bad.yaml');
  const cfg = config(['127.0.0.1:1', '127.0.0.1:2'], 'all');
  writeFileSync(file, stringify({ ...cfg, admin: { ...cfg.admin, ready_when: 'some', decisions: -1 } }));
  const p = runCli(['check-config', file]);
  t.equal(await p.exited(), 1, 'exit 1');
  t.match(p.stdout() + p.stderr(), /admin\.ready_when/, 'names admin.ready_when');
  t.match(p.stdout() + p.stderr(), /admin\.decisions/, 'names admin.decisions');
});
