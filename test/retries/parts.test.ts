// The pure parts of retries and ejection: which failures are retried, the budget's arithmetic, and the
// pool's ejection ceiling (the routing core, with time passed in).
import t from 'tap';
import { Router } from '../../src/routing/index.js';
import { RetryBudget, retryReasonOf, retryableStatus } from '../../src/gateway/retry.js';

const err = (code: string): Error => Object.assign(new Error(code), { code });

t.test('only failures that prove the request was not taken are retried', async (t) => {
  for (const c of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']) t.equal(retryReasonOf(err(c)), 'connect', c);
  for (const c of ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']) t.equal(retryReasonOf(err(c)), 'reset', c);
  for (const c of ['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_ABORTED', 'UND_ERR_INVALID_ARG', '']) {
    t.equal(retryReasonOf(err(c)), null, `${c || 'no code'}: not retried`);
  }
  t.same([500, 502, 503, 504, 429, 400].filter(retryableStatus), [502, 503]);
});

t.test('the budget: budget_percent of the requests in progress, never under min_retry_concurrency', async (t) => {
  const b = new RetryBudget();
  const cfg = { budget_percent: 20, min_retry_concurrency: 3 };
  b.active = 5;
  t.equal(b.limit(cfg), 3, 'the minimum while few requests are in progress');
  b.active = 100;
  t.equal(b.limit(cfg), 20, '20% of 100');
  b.activeRetries = 19;
  t.ok(b.allows(cfg));
  b.activeRetries = 20;
  t.notOk(b.allows(cfg), 'spent');
  t.equal(b.limit({ budget_percent: 0, min_retry_concurrency: 0 }), 0, 'both 0: no retry at all');
});

t.test('ejection stops at max_ejection_percent of the pool (at least one; 0 turns it off)', async (t) => {
  const cases: Array<[number, number, number]> = [
    // endpoints, percent, most ejected at once
    [4, 50, 2],
    [4, 10, 1],
    [3, 50, 1],
    [10, 30, 3],
    [4, 100, 4],
    [4, 0, 0],
  ];
  for (const [n, pct, most] of cases) {
    const eps = Array.from({ length: n }, (_, i) => `e${i}:1`);
    const r = Router.fromPool('p', { max_ejection_percent: pct, policy: 'round_robin' }, eps);
    // every endpoint fails three times in a row, at the same moment
    for (const ep of eps) {
      for (let k = 0; k < 3; k++) {
        const res = r.pick('p', { model: 'm', promptText: '', promptTokens: 1, exclude: new Set(eps.filter((e) => e !== ep)) }, 0);
        if (res.kind === 'ok') r.onEnd(res.ticket, 1, 'error');
      }
    }
    const d = (r.debugPools(2) as Record<string, { ejection: { ejected: number; max_ejected: number }; endpoints: Array<{ ejections_held_back: number }> }>).p;
    t.equal(d.ejection.ejected, most, `${n} endpoints at ${pct}%: ${most} ejected`);
    t.equal(d.ejection.max_ejected, most);
    t.equal(d.endpoints.filter((e) => e.ejections_held_back > 0).length, pct === 0 ? 0 : n - most, pct === 0 ? 'ejection off: none held back' : 'the others held back');
  }
});

t.test('an aborted request (the gateway\'s or the client\'s doing) never counts toward ejection', async (t) => {
  const r = Router.fromPool('p', {}, ['x:1', 'y:1']);
  for (let k = 0; k < 10; k++) {
    const res = r.pick('p', { model: 'm', promptText: '', promptTokens: 1, exclude: new Set(['y:1']) }, 0);
    if (res.kind === 'ok') r.onEnd(res.ticket, 1, 'aborted');
  }
  const d = (r.debugPools(2) as Record<string, { ejection: { ejected: number } }>).p;
  t.equal(d.ejection.ejected, 0);
});
