// Which class a request gets (src/gateway/flow.ts): the token's claim, the tenant's override, the
// priority header only when the config trusts its sender, the tenants' default, standard. Then through a
// real gateway (auth off, so the header is all a client has): a client that is not trusted cannot promote
// itself with the header, and one that is trusted can demote itself to sheddable.
import t from 'tap';
import { priorityOf, trustedPriorityHeader } from '../../src/gateway/flow.js';
import { ModelGrant, type Identity } from '../../src/auth/claims.js';
import { startGateway, gatewayConfig, until } from '../helpers/process.js';
import { startMocks, scrape, metric, debugPools } from '../e2e/support.js';

const id = (tenant: string, priority?: Identity['priority']): Identity => ({ tenant, models: ModelGrant.ALL, priority, expiresAt: Infinity });
const tenants = (def?: Identity['priority'], over: Record<string, Identity['priority']> = {}) => ({
  default: { priority: def },
  overrides: Object.fromEntries(Object.entries(over).map(([k, v]) => [k, { priority: v }])),
});

t.test('the order: claim, tenant override, trusted header, tenants.default, standard', async (t) => {
  t.equal(priorityOf(id('a', 'critical'), tenants('sheddable', { a: 'sheddable' }), 'sheddable'), 'critical', 'the token\'s claim first');
  t.equal(priorityOf(id('a'), tenants('critical', { a: 'sheddable' }), 'critical'), 'sheddable', 'then the tenant\'s override');
  t.equal(priorityOf(id('b'), tenants('sheddable', { a: 'critical' }), 'critical'), 'critical', 'then the header');
  t.equal(priorityOf(id('b'), tenants('sheddable'), undefined), 'sheddable', 'then tenants.default');
  t.equal(priorityOf(id('b'), tenants(), undefined), 'standard', 'else standard');
  t.equal(priorityOf(id('b'), tenants(), ' Critical '), 'critical', 'the header\'s value: case and spaces do not matter');
  t.equal(priorityOf(id('b'), tenants(), 'vip'), 'standard', 'a value that is no class is passed over');
  t.equal(priorityOf(id('__proto__'), tenants(), undefined), 'standard', 'a tenant named like an object key is only a name');
  t.equal(priorityOf(undefined, tenants(undefined, { anonymous: 'sheddable' }), undefined), 'sheddable', 'auth off: the tenant is "anonymous"');
});

t.test('the header is read only when its sender is trusted', async (t) => {
  const h = { 'x-infergate-priority': 'critical' };
  const cfg = (trust: 'never' | 'trusted_proxies' | 'always') => ({ name: 'X-Infergate-Priority', trust });
  t.equal(trustedPriorityHeader(cfg('never'), h, () => true), undefined, 'never');
  t.equal(trustedPriorityHeader(cfg('trusted_proxies'), h, () => false), undefined, 'trusted_proxies, from a peer that is not one');
  t.equal(trustedPriorityHeader(cfg('trusted_proxies'), h, () => true), 'critical', 'trusted_proxies, from one');
  t.equal(trustedPriorityHeader(cfg('always'), h, () => false), 'critical', 'always');
  t.equal(trustedPriorityHeader(cfg('always'), {}, () => true), undefined, 'no header');
});

t.test('through a gateway: an untrusted header cannot promote; a trusted one can demote', async (t) => {
  const mocks = await startMocks(1, ['--model', 'test-model', '--max-num-seqs', '1', '--decode-ms', '20', '--seed', '4']);
  t.teardown(() => mocks.kill());
  const pool = { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 1, kv_cache: 0.9, retry_after: '1s' }, queue: { max_length: 10, max_wait: '30s' } };
  // the peer (127.0.0.1) is not in trusted_proxies: with trust: trusted_proxies its header is ignored
  const untrusted = await startGateway(gatewayConfig(mocks.endpoints, { pool, over: { auth: { mode: 'none', allow_unauthenticated: true, priority_header: { trust: 'trusted_proxies' } } } }));
  t.teardown(() => untrusted.stop());
  const send = (url: string, prio: string, maxTokens: number, signal?: AbortSignal) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-infergate-priority': prio },
      body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: maxTokens, messages: [{ role: 'user', content: `${prio} ${Math.random()}` }] }),
      signal: signal ?? AbortSignal.timeout(60_000),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
  const stop = new AbortController();
  const fillers = [1, 2].map(() => send(untrusted.url, 'standard', 300, stop.signal).catch(() => undefined));
  await until(async () => (await debugPools(untrusted)).p.endpoints.every((e) => e.signals !== null && e.signals.waiting >= 1 && !e.eligible), 10_000, 'the pool saturated');
  const claimed = send(untrusted.url, 'critical', 2);
  await until(async () => metric(await scrape(untrusted.adminUrl), 'infergate_queue_length', { priority: 'standard' }) === 1, 10_000, 'the request queued');
  t.equal(metric(await scrape(untrusted.adminUrl), 'infergate_queue_length', { priority: 'critical' }), 0, 'it waits as standard, not as the critical it claimed');
  const demoted = send(untrusted.url, 'sheddable', 2);
  await until(async () => metric(await scrape(untrusted.adminUrl), 'infergate_queue_length', { priority: 'standard' }) === 2, 10_000, 'the "sheddable" one queued too');
  t.pass('an untrusted "sheddable" header is ignored as well: that request waits as standard instead of a 429');

  // a second gateway on the same server that trusts every client's header: "sheddable" gets its 429 at once
  const trusting = await startGateway(gatewayConfig(mocks.endpoints, { pool, over: { auth: { mode: 'none', allow_unauthenticated: true, priority_header: { trust: 'always' } } } }));
  t.teardown(() => trusting.stop());
  await until(async () => (await debugPools(trusting)).p.endpoints.every((e) => e.signals !== null && e.signals.waiting >= 1 && !e.eligible), 10_000, 'the second gateway to see the pool saturated');
  const shed = await send(trusting.url, 'sheddable', 2);
  t.equal(shed.status, 429, 'a trusted "sheddable" header: 429 at once');
  t.equal(metric(await scrape(trusting.adminUrl), 'infergate_rejected_total', { reason: 'saturated', priority: 'sheddable' }), 1, 'counted as sheddable');

  stop.abort();
  await Promise.all(fillers);
  t.same([(await claimed).status, (await demoted).status], [200, 200], 'the two that waited are served once the pool has room');
});
