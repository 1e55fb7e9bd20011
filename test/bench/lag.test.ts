import t from 'tap';
import { checkLag, runSchedule } from '../../native-bench/lag.js';

t.test('checkLag: a punctual schedule is valid, a late one is flagged', async (t) => {
  const punctual = Array.from({ length: 1000 }, (_, i) => (i % 10) * 0.5); // 0..4.5 ms
  const ok = checkLag(punctual, 50);
  t.equal(ok.valid, true);
  t.equal(ok.invalid_reason, undefined);
  t.ok(ok.p99_ms <= 5);

  // 2% of requests 200 ms late: p99 is over the bound.
  const late = punctual.map((v, i) => (i % 50 === 0 ? 200 : v));
  const bad = checkLag(late, 50);
  t.equal(bad.valid, false);
  t.match(bad.invalid_reason, /p99 lag 200 ms > bound 50 ms/);
  t.equal(bad.max_ms, 200);

  t.equal(checkLag([], 50).valid, false, 'nothing sent is not a valid run');
});

// How late a send is depends on the machine's load (a figure for native-bench, not a test); what must hold
// anywhere: every request is sent once, in order, never before its time, and its lag is what was measured.
t.test('runSchedule sends each request once, in order, never early, and reports each lag', async (t) => {
  const schedule = Array.from({ length: 50 }, (_, i) => i * 4); // 250/s for 200 ms
  const sent: number[] = [];
  const at: number[] = [];
  const { lags, unsent } = await runSchedule({
    scheduleMs: schedule,
    send: (i) => {
      sent.push(i);
      at.push(performance.now());
    },
  });
  t.equal(unsent, 0);
  t.same(sent, schedule.map((_, i) => i), 'sent in order, each once');
  t.equal(lags.length, schedule.length, 'a lag per request');
  t.ok(Array.from(lags).every((l) => Number.isFinite(l) && l >= 0), 'no lag is negative (nothing is sent early)');
  for (let i = 1; i < at.length; i++) {
    // the gap between two sends is never shorter than the schedule's, minus what the first one was late by
    if (at[i] - at[0] < schedule[i] - schedule[0] - lags[0] - 1) t.fail(`request ${i} sent ${schedule[i] - (at[i] - at[0])} ms early`);
  }
});

t.test('an overloaded generator is flagged: sending costs more than the schedule allows', async (t) => {
  // 1000 req/s scheduled, but each send blocks the client for 3 ms: it falls further and further behind.
  const schedule = Array.from({ length: 100 }, (_, i) => i);
  const busy = (ms: number): void => { const end = performance.now() + ms; while (performance.now() < end) { /* spin */ } };
  const { lags } = await runSchedule({ scheduleMs: schedule, send: () => busy(3) });
  const rep = checkLag(lags, 50);
  t.equal(rep.valid, false, `p99 lag ${rep.p99_ms} ms`);
  t.ok(rep.p99_ms > 100, 'lag grows to about 2 ms per request');
  t.match(rep.invalid_reason, /load generator lagged/);
});

t.test('prepare runs ahead of sending', async (t) => {
  const schedule = Array.from({ length: 20 }, (_, i) => 20 + i * 5);
  const prepared = new Set<number>();
  const order: string[] = [];
  const { lags } = await runSchedule({
    scheduleMs: schedule,
    prepare: (i) => { prepared.add(i); order.push(`p${i}`); },
    send: (i) => { order.push(`s${i}`); t.ok(prepared.has(i), `request ${i} prepared before send`); },
  });
  t.equal(prepared.size, 20);
  t.ok(order.indexOf('p5') < order.indexOf('s5'));
  t.equal(lags.length, 20, 'every request sent, its lag measured');
});

t.test('a deadline stops the schedule and counts the unsent as late', async (t) => {
  const schedule = [0, 10, 5000, 6000];
  const { lags, unsent } = await runSchedule({ scheduleMs: schedule, send: () => undefined, deadlineMs: 100 });
  t.equal(unsent, 2);
  t.equal(lags.length, 4);
});
