import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { Deadline, DeadlineQueue, Deadlines, type DeadlineOwner } from '../../src/gateway/deadlines.js';

/** Resolves when `check` holds, polling every 5 ms; rejects after `ms`. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(5);
  }
}

function recorder(): DeadlineOwner & { passed: Array<{ tag: number; late: number }> } {
  const passed: Array<{ tag: number; late: number }> = [];
  return { passed, deadlinePassed: (d: Deadline) => passed.push({ tag: d.tag, late: performance.now() - d.at }) };
}

t.test('deadlines pass in order, never early, and a cancelled one never passes', async (t) => {
  const q = new DeadlineQueue(40, (err) => t.fail(String(err)));
  const o = recorder();
  const ds: Deadline[] = [];
  for (let i = 0; i < 5; i++) {
    ds.push(q.add(o, i));
    await sleep(3);
  }
  // The head first (the timer is armed for it and must re-arm for the next), then one inside. On a slow
  // machine some may have passed already: a cancel then changes nothing, and they are expected.
  const cancelled = new Set<number>();
  for (const i of [0, 2]) {
    if (ds[i].queue !== null) cancelled.add(i);
    ds[i].cancel();
  }
  ds[2].cancel(); // idempotent
  const expected = [0, 1, 2, 3, 4].filter((i) => !cancelled.has(i));
  t.equal(q.size + o.passed.length, expected.length);
  await until(() => o.passed.length >= expected.length);
  t.same(o.passed.map((p) => p.tag), expected, 'in order, the cancelled ones left out');
  for (const p of o.passed) t.ok(p.late >= 0, 'not before its time');
  t.equal(q.size, 0);
  ds[1].cancel(); // after it passed: nothing happens
  t.equal(q.size, 0);
});

t.test('an owner may add and cancel while told; one that throws is reported and the rest still pass', async (t) => {
  const errors: unknown[] = [];
  const q = new DeadlineQueue(20, (err) => errors.push(err));
  const passed: number[] = [];
  let later: Deadline | undefined;
  const owner: DeadlineOwner = {
    deadlinePassed(d) {
      passed.push(d.tag);
      if (d.tag === 1) throw new Error('owner bug');
      if (d.tag === 2) later = q.add(owner, 3);
    },
  };
  q.add(owner, 1);
  q.add(owner, 2);
  await until(() => passed.length === 3);
  t.same(passed, [1, 2, 3]);
  t.equal(errors.length, 1, 'the exception went to onError');
  t.equal(later?.queue, null);
});

t.test('Deadlines keeps one queue per length', async (t) => {
  const all = new Deadlines((err) => t.fail(String(err)));
  const o = recorder();
  all.add(60, o, 60);
  const short = all.add(10, o, 10);
  t.not(short.queue, null);
  await until(() => o.passed.length === 2);
  t.same(o.passed.map((p) => p.tag), [10, 60], 'the shorter length passes first');
});
