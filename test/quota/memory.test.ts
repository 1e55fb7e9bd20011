// The in-memory quota (quota.backend: memory) on a driven clock: each limit, how it refills, the
// correction by real usage, and max_concurrent released exactly once.
import t from 'tap';
import { MemoryLimiter, Quota, TenantTable, quotaError, rateLimitHeaders, type QuotaDecision } from '../../src/quota/index.js';
import { configSchema } from '../../src/config/schema.js';

function quotaWith(tenants: Record<string, unknown>) {
  const cfg = configSchema.parse({
    auth: { mode: 'none', allow_unauthenticated: true },
    tenants,
    models: [{ name: 'm', pool: 'p' }],
    pools: { p: { endpoints: ['127.0.0.1:1'] } },
  });
  let now = 1_000_000;
  const q = new Quota(cfg.tenants, cfg.quota, { now: () => now });
  return { q, advance: (ms: number) => (now += ms) };
}

t.test('limits come from tenants.default, and an override replaces only the keys it names', async (t) => {
  const table = new TenantTable({
    default: { requests_per_minute: 600, tokens_per_minute: 1000 },
    overrides: { batch: { requests_per_minute: 60, priority: 'sheddable' }, vip: { max_concurrent: 2 } },
  });
  t.same(table.limitsFor('anyone'), { requestsPerMinute: 600, tokensPerMinute: 1000 });
  t.same(table.limitsFor('batch'), { requestsPerMinute: 60, tokensPerMinute: 1000 });
  t.same(table.limitsFor('vip'), { requestsPerMinute: 600, tokensPerMinute: 1000, maxConcurrent: 2 });
  t.ok(table.anyLimit);
  t.notOk(new TenantTable({ default: {}, overrides: {} }).anyLimit, 'no key: nothing is limited');
});

t.test('a tenant without limits is let through uncounted, with no headers', async (t) => {
  const { q } = quotaWith({ default: {}, overrides: { x: { requests_per_minute: 1 } } });
  const d = await q.admit('free', 10);
  t.equal(d.allowed, true);
  t.equal(d.source, 'unlimited');
  t.same(rateLimitHeaders(d), []);
});

t.test('requests_per_minute: a minute\'s worth at once, then one more every 60/limit seconds', async (t) => {
  const { q, advance } = quotaWith({ default: { requests_per_minute: 6 } });
  const seen: QuotaDecision[] = [];
  for (let i = 0; i < 6; i++) seen.push(await q.admit('a', 1));
  t.ok(seen.every((d) => d.allowed), 'the burst of 6 is admitted');
  t.same(seen.map((d) => d.remainingRequests), [5, 4, 3, 2, 1, 0], 'remaining counts down');
  const refused = await q.admit('a', 1);
  t.equal(refused.allowed, false);
  t.equal(refused.reason, 'requests');
  t.equal(refused.retryAfterS, 10, 'one request refills in 60/6 = 10 s');
  const e = quotaError(refused);
  t.equal(e.status, 429);
  t.equal(e.code, 'rate_limit_exceeded');
  t.equal(e.retryAfterS, 10);
  t.equal(e.rejectReason, 'rate_limited');
  t.equal((await q.admit('other', 1)).allowed, true, 'another tenant has its own bucket');
  advance(9_999);
  t.equal((await q.admit('a', 1)).allowed, false, 'not before the 10 s');
  advance(1);
  const again = await q.admit('a', 1);
  t.equal(again.allowed, true, 'after 10 s one more');
  t.equal(again.resetRequestsMs, 60_000, 'the bucket is a full minute from full again');
  advance(60_000);
  t.equal((await q.admit('a', 1)).remainingRequests, 5, 'after a quiet minute the bucket is full (6, one taken)');
});

t.test('tokens_per_minute counts the prompt estimate, and the answer\'s usage corrects it', async (t) => {
  const { q, advance } = quotaWith({ default: { tokens_per_minute: 1000 } });
  const first = await q.admit('a', 300);
  t.equal(first.remainingTokens, 700);
  first.lease.reconcile(250, 450); // real prompt 250 (estimate 300) + 450 completion: 400 more
  const second = await q.admit('a', 100);
  t.equal(second.remainingTokens, 200, '1000 − 700 − 100');
  second.lease.reconcile(100, 0);
  second.lease.reconcile(100, 5000);
  t.equal((await q.admit('a', 0)).remainingTokens, 200, 'a second reconcile is ignored');
  const refused = await q.admit('a', 500);
  t.equal(refused.allowed, false);
  t.equal(refused.reason, 'tokens');
  t.equal(refused.retryAfterS, 18, '300 tokens missing at 1000/min: 18 s');
  t.match(quotaError(refused).message, /tokens per minute/);
  advance(18_000);
  t.equal((await q.admit('a', 500)).allowed, true);
});

t.test('a reconcile below the estimate gives tokens back, never above the limit', async (t) => {
  const { q, advance } = quotaWith({ default: { tokens_per_minute: 1000 } });
  const d = await q.admit('a', 600);
  d.lease.reconcile(10, 0);
  t.equal((await q.admit('a', 0)).remainingTokens, 990, '590 of the 600 estimated come back');
  const e = await q.admit('b', 600);
  advance(60_000); // refilled to the brim meanwhile
  e.lease.reconcile(0, 0);
  t.equal((await q.admit('b', 0)).remainingTokens, 1000, 'full, not 1600');
});

t.test('nonsense usage numbers from a model server are not believed', async (t) => {
  const { q } = quotaWith({ default: { tokens_per_minute: 1000 } });
  const d = await q.admit('a', 100);
  d.lease.reconcile(Number.NaN, -5);
  t.equal((await q.admit('a', 0)).remainingTokens, 900, 'prompt falls back to the estimate, a negative completion to 0');
  const e = await q.admit('b', 100);
  e.lease.reconcile(100, Number.POSITIVE_INFINITY);
  t.equal((await q.admit('b', 0)).remainingTokens, 900);
});

t.test('a prompt larger than a minute\'s tokens goes once the bucket is full, and leaves it in debt', async (t) => {
  const { q, advance } = quotaWith({ default: { tokens_per_minute: 1000 } });
  const big = await q.admit('a', 3000);
  t.equal(big.allowed, true, 'admitted on a full bucket (else it could never go)');
  t.equal(rateLimitHeaders(big).find(([k]) => k === 'x-ratelimit-remaining-tokens')?.[1], '0', 'remaining never shows below 0');
  t.equal(big.resetTokensMs, 180_000, '3000 tokens of debt + refill: 3 minutes to full');
  const next = await q.admit('a', 1);
  t.equal(next.allowed, false);
  t.equal(next.retryAfterS, 121, 'the debt is paid first');
  advance(121_000);
  t.equal((await q.admit('a', 1)).allowed, true);
});

t.test('max_concurrent: a slot per request in flight, released exactly once whatever the end', async (t) => {
  const { q } = quotaWith({ default: { max_concurrent: 2 } });
  const a = await q.admit('t', 1);
  const b = await q.admit('t', 1);
  t.ok(a.allowed && b.allowed);
  const c = await q.admit('t', 1);
  t.equal(c.allowed, false);
  t.equal(c.reason, 'concurrency');
  t.equal(c.retryAfterS, 1);
  t.match(quotaError(c).message, /concurrent requests/);
  c.lease.release(); // a refused decision's lease: nothing to give back
  t.equal(q.debugState('t').localInFlight, 2);
  a.lease.release();
  a.lease.release(); // the error path and the end both release: only one counts
  a.lease.release();
  t.equal(q.debugState('t').localInFlight, 1, 'released once');
  const d = await q.admit('t', 1);
  t.equal(d.allowed, true, 'the freed slot is used');
  t.equal((await q.admit('t', 1)).allowed, false, 'and the other is still held');
  b.lease.release();
  d.lease.release();
  t.equal(q.debugState('t').localInFlight, 0);
});

t.test('with several limits the binding one names the refusal', async (t) => {
  const { q } = quotaWith({ default: { requests_per_minute: 60, tokens_per_minute: 600, max_concurrent: 5 } });
  const d = await q.admit('t', 600);
  t.equal(d.allowed, true);
  const r = await q.admit('t', 60);
  t.equal(r.reason, 'tokens', 'tokens (6 s) bind before requests (which has 59 left)');
  t.equal(r.retryAfterS, 6);
  t.same(
    rateLimitHeaders(r).map(([k]) => k),
    [
      'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests',
      'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens',
    ],
  );
});

t.test('idle tenants are forgotten once their buckets are full again', async (t) => {
  let now = 0;
  const m = new MemoryLimiter(() => now);
  const limits = { requestsPerMinute: 10 };
  for (let i = 0; i < 100; i++) m.admit(`t${i}`, limits, 0);
  t.equal(m.size, 100);
  now += 60_000;
  m.admit('late', limits, 0);
  t.equal(m.size, 1, 'the 100 idle, full ones are swept');
});
