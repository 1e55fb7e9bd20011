// A decision as the client reads it: OpenAI's x-ratelimit-* headers (reset as Go durations, as OpenAI
// writes them) and the refusal's error.
import t from 'tap';
import { formatResetDuration, NO_LEASE, quotaError, rateLimitHeaders, type QuotaDecision } from '../../src/quota/index.js';

t.test('reset durations are written as OpenAI writes them', async (t) => {
  const cases: Array<[number, string]> = [
    [0, '0s'], [-5, '0s'], [Number.NaN, '0s'], [0.2, '1ms'], [12, '12ms'], [999.1, '1s'], [1000, '1s'], [1500, '1.5s'],
    [17_280, '17.28s'], [60_000, '1m0s'], [360_000, '6m0s'], [61_250, '1m1.25s'], [3_600_000, '1h0m0s'], [3_723_004, '1h2m3.004s'],
  ];
  for (const [ms, text] of cases) t.equal(formatResetDuration(ms), text, `${ms} ms`);
});

const base = { tenant: 'team-a', lease: NO_LEASE, source: 'memory' } as const;

t.test('the headers of an admitted request', async (t) => {
  const d: QuotaDecision = {
    ...base, allowed: true, limits: { requestsPerMinute: 60, tokensPerMinute: 150000 },
    remainingRequests: 59, resetRequestsMs: 1000, remainingTokens: 149_984.7, resetTokensMs: 6.2,
  };
  t.same(rateLimitHeaders(d), [
    ['x-ratelimit-limit-requests', '60'],
    ['x-ratelimit-remaining-requests', '59'],
    ['x-ratelimit-reset-requests', '1s'],
    ['x-ratelimit-limit-tokens', '150000'],
    ['x-ratelimit-remaining-tokens', '149984'],
    ['x-ratelimit-reset-tokens', '7ms'],
  ]);
  t.same(rateLimitHeaders({ ...base, allowed: true, limits: { maxConcurrent: 3 } }), [], 'max_concurrent alone has no OpenAI header');
  t.same(rateLimitHeaders({ ...base, allowed: true, source: 'allow', limits: { requestsPerMinute: 60 } }), [], 'uncounted (Redis down, allow): no numbers made up');
});

t.test('a refusal is a 429 with Retry-After, or a 503 when the store is down and on_backend_error is deny', async (t) => {
  const d: QuotaDecision = {
    ...base, allowed: false, limits: { requestsPerMinute: 60 }, remainingRequests: 0.4, resetRequestsMs: 59_600, reason: 'requests', retryAfterS: 1,
  };
  const e = quotaError(d);
  t.equal(e.status, 429);
  t.equal(e.statusText, '429 Too Many Requests');
  t.equal(e.code, 'rate_limit_exceeded');
  t.equal(e.type, 'rate_limit_error');
  t.equal(e.retryAfterS, 1);
  t.match(e.message, /team-a.*requests per minute.*60/);
  t.same(rateLimitHeaders(d).slice(1, 3), [['x-ratelimit-remaining-requests', '0'], ['x-ratelimit-reset-requests', '59.6s']]);
  const down = quotaError({ ...base, allowed: false, source: 'deny', limits: { requestsPerMinute: 60 }, reason: 'backend', retryAfterS: 1 });
  t.equal(down.status, 503);
  t.equal(down.code, 'quota_unavailable');
  t.equal(down.retryAfterS, 1);
  t.equal(down.rejectReason, 'overloaded');
});
