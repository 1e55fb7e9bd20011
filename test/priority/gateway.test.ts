// Priority classes and the per-pool wait queue through a real gateway process and real mock vLLM servers
// made small (one sequence at a time, slow decode) so that a pool saturates: sheddable traffic is refused
// with 429 + Retry-After while critical requests wait in the gateway and succeed; two tenants flooding
// the standard class are served in turns; a queued client that hangs up leaves the queue at once and the
// model server never sees its request; a wait past max_wait is answered 429. Tenants and classes come
// from signed tokens (a key pair made here, its JWKS in a file), as a user's identity provider would.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { startGateway, gatewayConfig, tempDir, until } from '../helpers/process.js';
import { startMocks, scrape, metric, mockMetric, debugPools } from '../e2e/support.js';

const ISS = 'https://issuer.test';
const AUD = 'infergate';
const keys = await generateKeyPair('ES256', { extractable: true });
const dir = tempDir();
writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [{ ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] }));

async function token(tenant: string, priority?: string): Promise<string> {
  const claims: Record<string, unknown> = { sub: tenant, models: '*' };
  if (priority) claims.priority = priority;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer(ISS)
    .setAudience(AUD)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(keys.privateKey);
}

// pool "p" (long waits allowed) on one server, pool "q" (1 s max wait, room for two waiters) on another
const small = ['--max-num-seqs', '1', '--decode-ms', '20', '--seed', '9'];
const mocks = await startMocks(1, ['--model', 'test-model', ...small]);
t.teardown(() => mocks.kill());
const mocksQ = await startMocks(1, ['--model', 'short-wait', ...small]);
t.teardown(() => mocksQ.kill());
const pool = { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 1, kv_cache: 0.9, retry_after: '2s' } };
const base = gatewayConfig([mocks.endpoints[0]], { pool: { ...pool, queue: { max_length: 50, max_wait: '60s' } } });
const gw = await startGateway({
  ...base,
  auth: { mode: 'jwt', jwt: { jwks_file: join(dir, 'jwks.json'), issuer: ISS, audience: AUD, algorithms: ['ES256'] } },
  models: [
    { name: 'test-model', pool: 'p' },
    { name: 'short-wait', pool: 'q' },
  ],
  pools: {
    ...base.pools,
    q: { ...base.pools.p, endpoints: mocksQ.endpoints, queue: { max_length: 2, max_wait: '1s' } },
  },
  logging: { level: 'info', access_log: true },
});
t.teardown(() => gw.stop());

interface Done {
  status: number;
  retryAfter: string | null;
  body: string;
  endedAt: number;
}

/** One streamed chat request with this token; resolves when the whole answer has arrived. */
async function call(tok: string, opts: { model?: string; maxTokens?: number; tag?: string; signal?: AbortSignal } = {}): Promise<Done> {
  const r = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${tok}` },
    body: JSON.stringify({
      model: opts.model ?? 'test-model',
      stream: true,
      max_tokens: opts.maxTokens ?? 4,
      messages: [{ role: 'user', content: `request ${opts.tag ?? Math.random()}` }],
    }),
    signal: opts.signal ?? AbortSignal.timeout(120_000),
  });
  const body = await r.text();
  return { status: r.status, retryAfter: r.headers.get('retry-after'), body, endedAt: performance.now() };
}

const gauge = async (name: string, labels: Record<string, string>) => metric(await scrape(gw.adminUrl), name, labels);
const queued = (pool: string, priority: string) => gauge('infergate_queue_length', { pool, priority });
/** Requests the server has finished, whatever the reason (a cancelled one counts as "abort"). */
const served = (i: number) => mockMetric(mocks.endpoints[i], 'vllm:request_success_total');

/**
 * Two long requests on the one-sequence server: one runs, one waits in its engine, so the pool is
 * saturated (queue_depth 1) until the first ends. Resolves once the gateway's scraped signals show the
 * waiting one (before that the picker may briefly count the second as running, as the scrape it had did).
 */
async function fill(model = 'test-model', pool = 'p', maxTokens = 120, signal?: AbortSignal): Promise<Promise<Done>[]> {
  const filler = await token('filler', 'critical');
  const fillers = [1, 2].map((i) => call(filler, { model, maxTokens, tag: `filler-${i}`, signal }));
  await until(async () => (await debugPools(gw))[pool].endpoints.every((e) => e.signals !== null && e.signals.waiting >= 1 && !e.eligible), 10_000, 'the gateway to see the pool saturated');
  return fillers;
}

t.test('saturated: sheddable is refused at once, critical waits in the queue and succeeds', async (t) => {
  const before = await served(0);
  const fillers = await fill();
  const shed = await token('batch', 'sheddable');
  const refused = await Promise.all([1, 2, 3].map((i) => call(shed, { tag: `shed-${i}` })));
  for (const r of refused) {
    t.equal(r.status, 429, 'sheddable: 429');
    t.match(r.retryAfter, /^[1-9]\d*$/, 'with Retry-After in whole seconds');
    t.match(JSON.parse(r.body), { error: { code: 'pool_saturated', type: 'rate_limit_error' } });
  }
  const crit = await token('ops', 'critical');
  const critical = [1, 2, 3].map((i) => call(crit, { tag: `critical-${i}` }));
  const results = await Promise.all(critical);
  t.same(results.map((r) => r.status), [200, 200, 200], 'every critical request succeeded');
  t.ok(results.every((r) => r.body.endsWith('data: [DONE]\n\n')), 'each one a whole stream');
  t.same((await Promise.all(fillers)).map((r) => r.status), [200, 200]);
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'saturated', priority: 'sheddable' }), 3, 'rejected{reason=saturated,priority=sheddable} counts the three');
  t.equal(metric(m, 'infergate_rejected_total', { priority: 'critical' }), 0, 'no critical request was refused');
  t.ok(metric(m, 'infergate_queue_wait_seconds_count', { pool: 'p', priority: 'critical', outcome: 'dispatched' }) >= 2, 'they waited in the gateway\'s queue (the histogram counts each wait as it ends)');
  t.equal(metric(m, 'infergate_queue_length', { pool: 'p' }), 0, 'the queue is empty again');
  await until(async () => (await served(0)) - before === 5, 10_000, 'the server to count its requests');
  t.equal((await served(0)) - before, 5, 'the server saw the two fillers and the three critical requests, no sheddable one');
});

t.test('two tenants flooding the standard class are served in turns', async (t) => {
  const fillers = await fill();
  const a = await token('tenant-a', 'standard');
  const b = await token('tenant-b', 'standard');
  const fromA = Array.from({ length: 8 }, (_, i) => call(a, { tag: `a-${i}` }).then((r) => ({ ...r, who: 'a' })));
  await until(async () => (await queued('p', 'standard')) === 8, 10_000, 'tenant a\'s eight requests queued');
  const fromB = Array.from({ length: 4 }, (_, i) => call(b, { tag: `b-${i}` }).then((r) => ({ ...r, who: 'b' })));
  await until(async () => (await queued('p', 'standard')) === 12, 10_000, 'and tenant b\'s four behind them');
  const all = await Promise.all([...fromA, ...fromB]);
  await Promise.all(fillers);
  t.ok(all.every((r) => r.status === 200), 'all twelve succeeded');
  // one sequence at a time: the order answers end in is the order they left the queue
  const order = all.sort((x, y) => x.endedAt - y.endedAt).map((r) => r.who).join('');
  t.comment(`completion order: ${order}`);
  const firstEight = order.slice(0, 8);
  t.ok([...firstEight].filter((w) => w === 'b').length >= 3, `tenant b, queued after all of a's, got at least 3 of the first 8 turns (${firstEight}); first come first served would give it none`);
});

t.test('a queued client that hangs up leaves the queue at once; its request never reaches the server', async (t) => {
  const before = await served(0);
  const fillers = await fill();
  const crit = await token('ops', 'critical');
  const ac = new AbortController();
  const gone = call(crit, { tag: 'leaves', signal: ac.signal }).catch((e: unknown) => e);
  await until(async () => (await queued('p', 'critical')) === 1, 10_000, 'the request queued');
  ac.abort();
  t.type(await gone, Error, 'the client gave up');
  await until(async () => (await queued('p', 'critical')) === 0, 5_000, 'the queue to be empty again');
  const left = await gauge('infergate_queue_wait_seconds_count', { pool: 'p', priority: 'critical', outcome: 'client_gone' });
  t.equal(left, 1, 'counted as a wait that ended with the client gone');
  t.ok((await gw.proc.waitFor(/"status":499[^\n]*"queued_ms"/)).length > 0, 'the access log says 499, with the time it waited');
  t.same((await Promise.all(fillers)).map((r) => r.status), [200, 200]);
  await until(async () => (await served(0)) - before === 2, 10_000, 'the server to count the fillers');
  // a little later still nothing more arrives (the fillers were all it was sent)
  t.equal((await served(0)) - before, 2, 'the server saw only the two fillers');
  t.equal(await gauge('infergate_pool_in_flight', { pool: 'p' }), 0, 'nothing left in flight');
});

t.test('a wait past max_wait is answered 429 with Retry-After; a full queue refuses at once', async (t) => {
  const stop = new AbortController();
  const fillers = await fill('short-wait', 'q', 400, stop.signal); // busy for seconds: longer than max_wait
  const tok = await token('ops', 'standard');
  // three at once into a queue with room for two: one is refused at once, the other two wait max_wait
  const results = await Promise.all([1, 2, 3].map((i) => call(tok, { model: 'short-wait', tag: `w${i}` })));
  for (const r of results) {
    t.equal(r.status, 429, '429');
    t.match(r.retryAfter, /^[1-9]\d*$/, 'with Retry-After');
    t.match(JSON.parse(r.body), { error: { code: 'pool_saturated', type: 'rate_limit_error' } });
  }
  t.equal(results.filter((r) => /waited/.test(r.body)).length, 2, 'two of them after waiting (the message says how long)');
  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'queue_timeout', pool: 'q', priority: 'standard' }), 2, 'rejected{reason=queue_timeout}');
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'saturated', pool: 'q', priority: 'standard' }), 1, 'the one that found the queue full, as saturated');
  t.equal(metric(m, 'infergate_queue_wait_seconds_count', { pool: 'q', outcome: 'expired' }), 2);
  stop.abort();
  await Promise.allSettled(fillers);
});
