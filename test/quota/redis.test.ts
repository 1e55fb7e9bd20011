// quota.backend: redis against a real redis-server: separate gateway processes share one quota, the
// concurrency leases of a process that dies come back, and while Redis is down or hung admission still
// answers, as quota.on_backend_error says; when Redis returns the gauge and the shared counts do too.
import t from 'tap';
import { Redis } from 'ioredis';
import { startRedis, type RunningRedis } from '../helpers/redis.js';
import { until } from '../helpers/process.js';
import { startWorker, type Worker } from './helpers/workers.js';

interface Admit {
  allowed: boolean;
  source: string;
  reason?: string;
  retryAfterS?: number;
  headers: Array<[string, string]>;
  lease?: number;
}

let redis: RunningRedis;
const workers: Worker[] = [];
// two "gateways" on one Redis (on_backend_error local, leases of 3 s), used by every test below
let a: Worker;
let b: Worker;
t.before(async () => {
  redis = await startRedis();
  [a, b] = await Promise.all([worker(quotaConfig('q:', 'local')), worker(quotaConfig('q:', 'local'))]);
});
t.teardown(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await redis?.stop();
});

function quotaConfig(prefix: string, onError: string) {
  return {
    tenants: {
      default: { requests_per_minute: 600 },
      overrides: {
        shared: { requests_per_minute: 40 },
        slots: { max_concurrent: 5 },
        tokens: { tokens_per_minute: 1000 },
        dying: { max_concurrent: 2 },
        owing: { tokens_per_minute: 1000, max_concurrent: 1 },
      },
    },
    quota: {
      backend: 'redis',
      // a timeout far above a Redis round trip (~0.1 ms) even on a loaded machine: a fallback here means
      // Redis did not answer, never that the machine was slow
      redis: { url: redis.url, key_prefix: prefix, timeout: '1s', lease_ttl: '3s' },
      on_backend_error: onError,
    },
  };
}

async function worker(config: unknown): Promise<Worker> {
  const w = await startWorker(config);
  workers.push(w);
  await until(async () => (await w.call<{ value: number }>({ op: 'gauge' })).value === 1, 20_000, 'the worker connected to Redis');
  return w;
}

t.test('two gateway processes share one quota through Redis', async (t) => {

  // requests_per_minute 40: both ask 40 at once; together they get the 40 (plus what refills meanwhile)
  const started = Date.now();
  const [ra, rb] = await Promise.all([
    a.call<{ admitted: number; sources: string[] }>({ op: 'burst', tenant: 'shared', n: 40 }),
    b.call<{ admitted: number; sources: string[] }>({ op: 'burst', tenant: 'shared', n: 40 }),
  ]);
  const refilled = Math.ceil((40 * (Date.now() - started)) / 60_000);
  t.same(ra.sources, ['redis']);
  t.same(rb.sources, ['redis']);
  t.ok(ra.admitted + rb.admitted >= 40, `all 40 went (${ra.admitted} + ${rb.admitted})`);
  t.ok(ra.admitted + rb.admitted <= 40 + refilled, `and no more than the limit (+${refilled} refilled meanwhile)`);
  const refused = await a.call<Admit>({ op: 'admit', tenant: 'shared' });
  t.equal(refused.allowed, false);
  t.equal(refused.reason, 'requests');
  t.ok((refused.retryAfterS ?? 0) >= 1);

  // max_concurrent 5, nothing refills it: exactly 5 between the two, until one is released
  const [sa, sb] = await Promise.all([
    a.call<{ admitted: number }>({ op: 'burst', tenant: 'slots', n: 5 }),
    b.call<{ admitted: number }>({ op: 'burst', tenant: 'slots', n: 5 }),
  ]);
  t.equal(sa.admitted + sb.admitted, 5, `exactly 5 slots (${sa.admitted} + ${sb.admitted})`);
  const full = await b.call<Admit>({ op: 'admit', tenant: 'slots' });
  t.equal(full.reason, 'concurrency');
  const holder = sa.admitted > 0 ? a : b;
  await holder.call({ op: 'release' });
  const other = holder === a ? b : a;
  // the release goes to Redis in the background: the other process sees it once it has landed
  const again = await until(async () => {
    const r = await other.call<Admit>({ op: 'admit', tenant: 'slots' });
    return r.allowed ? r : undefined;
  }, 20_000, 'a slot released by one process is usable by the other');
  t.equal(again.source, 'redis');

  // tokens: one process's reconcile is seen by the other
  const first = await a.call<Admit>({ op: 'admit', tenant: 'tokens', tokens: 100 });
  t.ok(first.allowed);
  await a.call({ op: 'reconcile', lease: first.lease, prompt: 100, completion: 700 });
  const seen = await until(async () => {
    const d = await b.call<Admit>({ op: 'admit', tenant: 'tokens', tokens: 0 });
    const left = Number(d.headers.find(([k]) => k === 'x-ratelimit-remaining-tokens')?.[1]);
    return left <= 200 ? d : undefined;
  }, 20_000, 'the other process sees the reconciled tokens');
  t.ok(seen.allowed);
  t.equal(seen.headers.find(([k]) => k === 'x-ratelimit-limit-tokens')?.[1], '1000');
});

t.test('the leases of a gateway that dies expire; live ones are renewed', async (t) => {
  const doomed = await worker(quotaConfig('q:', 'local'));
  const cli = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 2_000 });
  t.teardown(() => cli.disconnect());

  const held = await b.call<Admit>({ op: 'admit', tenant: 'dying' });
  t.ok(held.allowed);
  const [id] = await cli.zrange('q:c:dying', 0, 0);
  const first = Number(await cli.zscore('q:c:dying', id));
  await until(async () => Number(await cli.zscore('q:c:dying', id)) > first, 5_000, 'the live lease is renewed');

  const d = await doomed.call<Admit>({ op: 'admit', tenant: 'dying' });
  t.ok(d.allowed, 'the second slot is taken by a process about to die');
  t.equal(d.source, 'redis');
  await doomed.kill();
  t.equal((await a.call<Admit>({ op: 'admit', tenant: 'dying' })).reason, 'concurrency', 'right after its death both slots are taken');
  const back = await until(async () => {
    const r = await a.call<Admit>({ op: 'admit', tenant: 'dying' });
    return r.allowed ? r : undefined;
  }, 10_000, 'the dead process\'s slot expires (lease_ttl 3s)');
  t.ok(back.allowed);
  t.equal((await a.call<Admit>({ op: 'admit', tenant: 'dying' })).reason, 'concurrency', 'the live lease was never lost');
});

t.test('what a gateway owes Redis while cut off from it is sent when it is back', async (t) => {
  const w = await worker(quotaConfig('q:', 'local'));
  const cli = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 2_000 });
  t.teardown(() => cli.disconnect());
  const held = await w.call<Admit>({ op: 'admit', tenant: 'owing', tokens: 100 });
  t.equal(held.source, 'redis');
  t.equal(await cli.zcard('q:c:owing'), 1, 'the lease is in Redis');

  // cut every other client off while Redis keeps its data: no new connection is accepted, so the
  // gateway's reconnections fail until maxclients is raised again
  await cli.config('SET', 'maxclients', '1');
  try {
    await cli.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await until(async () => (await w.call<{ value: number }>({ op: 'gauge' })).value === 0, 10_000, 'the gateway sees Redis gone');
    // the answer's usage (100 prompt + 500 completion) and the end of the request, while cut off
    await w.call({ op: 'reconcile', lease: held.lease, prompt: 100, completion: 500 });
    await w.call({ op: 'release', leases: [held.lease] });
    const owed = await w.call<{ owed: { charges: number; releases: number } }>({ op: 'state', tenant: 'owing' });
    t.same(owed.owed, { charges: 1, releases: 1, dropped: 0 }, 'kept, not lost');
    t.equal(await cli.zcard('q:c:owing'), 1, 'Redis still holds the slot');
  } finally {
    await cli.config('SET', 'maxclients', '10000');
  }
  await until(async () => (await w.call<{ value: number }>({ op: 'gauge' })).value === 1, 10_000, 'reconnected');
  await until(async () => {
    const s = await w.call<{ owed: { charges: number; releases: number } }>({ op: 'state', tenant: 'owing' });
    return s.owed.charges === 0 && s.owed.releases === 0;
  }, 10_000, 'the owed work was sent');
  await until(async () => (await cli.zcard('q:c:owing')) === 0, 10_000, 'the slot is free at once, not after lease_ttl');
  const left = Number(await cli.hget('q:b:owing', 't'));
  // 1000 - 100 at admission - 500 reconciled, plus what refilled since (1000 a minute)
  t.ok(left >= 400 && left < 600, `the reconciled tokens were charged (${left} left)`);
  const next = await w.call<Admit>({ op: 'admit', tenant: 'owing' });
  t.ok(next.allowed, 'the tenant\'s one slot is usable again');
  t.equal(next.source, 'redis');
});

t.test('Redis down, hung, then back: admission answers per on_backend_error, and recovers', async (t) => {
  const modes = ['allow', 'local', 'deny'] as const;
  const [allow, deny] = await Promise.all([worker(quotaConfig('q:', 'allow')), worker(quotaConfig('q:', 'deny'))]);
  const ws = [allow, a, deny];
  for (const w of ws) t.equal((await w.call<Admit>({ op: 'admit', tenant: 'anyone' })).source, 'redis');

  await redis.kill();
  for (const [i, w] of ws.entries()) {
    await until(async () => (await w.call<{ value: number }>({ op: 'gauge' })).value === 0, 5_000, `${modes[i]}: the gauge shows Redis down`);
    // many admissions while it is down: each answers, with the mode's decision
    for (let k = 0; k < 20; k++) {
      const d = await w.call<Admit>({ op: 'admit', tenant: 'anyone' }, 10_000);
      t.equal(d.source, modes[i] === 'allow' ? 'allow' : modes[i] === 'local' ? 'local' : 'deny', `${modes[i]}: decided without Redis`);
      t.equal(d.allowed, modes[i] !== 'deny');
      if (modes[i] === 'deny') t.equal(d.reason, 'backend');
      if (modes[i] === 'local') t.equal(d.headers.find(([k]) => k === 'x-ratelimit-limit-requests')?.[1], '600', 'local counts have headers');
      if (modes[i] === 'allow') t.same(d.headers, [], 'uncounted: no headers');
    }
    const { logs } = await w.call<{ logs: Array<{ level: string; msg: string }> }>({ op: 'logs' });
    t.equal(logs.filter((l) => l.level === 'warn').length, 1, `${modes[i]}: the outage is logged once, not per request`);
  }

  await redis.restart();
  for (const [i, w] of ws.entries()) {
    await until(async () => (await w.call<{ value: number }>({ op: 'gauge' })).value === 1, 10_000, `${modes[i]}: reconnected, the gauge flips back`);
    t.equal((await w.call<Admit>({ op: 'admit', tenant: 'anyone' })).source, 'redis', `${modes[i]}: counted in Redis again (the scripts reloaded)`);
    const { logs } = await w.call<{ logs: Array<{ level: string; msg: string }> }>({ op: 'logs' });
    t.ok(logs.some((l) => l.level === 'info' && /again/.test(l.msg)), `${modes[i]}: the return is logged`);
  }

  // hung (SIGSTOP): the connection stays open but nothing answers; quota.redis.timeout bounds each wait
  redis.pause();
  try {
    for (const [i, w] of ws.entries()) {
      const d = await w.call<Admit>({ op: 'admit', tenant: 'anyone' }, 10_000);
      t.equal(d.source, modes[i], `${modes[i]}: a hung Redis times out (quota.redis.timeout) into the mode's decision`);
    }
    t.equal((await ws[0].call<{ value: number }>({ op: 'gauge' })).value, 0, 'a timeout counts as down');
  } finally {
    redis.resume();
  }
  for (const w of ws) {
    const d = await until(async () => {
      const r = await w.call<Admit>({ op: 'admit', tenant: 'anyone' });
      return r.source === 'redis' ? r : undefined;
    }, 10_000, 'answers from Redis again after it resumed');
    t.ok(d.allowed);
    t.equal((await w.call<{ value: number }>({ op: 'gauge' })).value, 1);
  }
});
