// Request bodies while they arrive (src/gateway/body.ts): memory that follows the bytes, whatever the
// chunking, and one budget for all bodies being gathered; the list of bodies under way that the slow-upload
// sweep reads.
import t from 'tap';
import { BodyBudget, BodyCollector, Upload, Uploads } from '../../src/gateway/body.js';

t.test('a body sent one byte at a time is gathered whole in about its own size', async (t) => {
  const budget = new BodyBudget(1 << 20);
  const c = new BodyCollector(1 << 20, budget);
  const src = Buffer.from(Array.from({ length: 100_000 }, (_, i) => i % 251));
  let refused = 0;
  for (let i = 0; i < src.length; i++) if (c.add(src.subarray(i, i + 1)) !== 'ok') refused++;
  t.equal(refused, 0, 'every byte accepted');
  t.ok(budget.inUse >= src.length && budget.inUse <= 2 * src.length, `holds ${budget.inUse} bytes for ${src.length}`);
  const body = c.take();
  t.same(body, src, 'byte for byte');
  t.equal(budget.inUse, 0, 'handed on: its share is back');
});

t.test('over the route limit: too_large, and nothing is kept', async (t) => {
  const budget = new BodyBudget(1 << 20);
  const c = new BodyCollector(1000, budget);
  t.equal(c.add(Buffer.alloc(600)), 'ok');
  t.equal(c.add(Buffer.alloc(400)), 'ok', 'exactly the limit');
  t.equal(c.add(Buffer.alloc(1)), 'too_large');
  t.equal(budget.inUse, 0);
  t.equal(c.take().length, 0);
});

t.test('bodies together over the budget: no_budget for the one that would pass it; drop gives back', async (t) => {
  const budget = new BodyBudget(64 * 1024);
  const a = new BodyCollector(1 << 20, budget);
  const b = new BodyCollector(1 << 20, budget);
  t.equal(a.add(Buffer.alloc(40_000)), 'ok');
  t.equal(budget.inUse, 65_536, 'a grew to 64 KiB');
  t.equal(b.add(Buffer.alloc(10)), 'no_budget');
  t.equal(budget.inUse, 65_536, 'b holds nothing');
  a.drop();
  t.equal(budget.inUse, 0, 'a dropped (its client left): its share is back');
  const c = new BodyCollector(1 << 20, budget);
  t.equal(c.add(Buffer.alloc(40_000)), 'ok', 'the next body fits again');
  c.drop();
  t.equal(budget.inUse, 0);
});

t.test('Uploads: the bodies under way, added and taken out in any order, the slow ones taken by the sweep', async (t) => {
  const list = new Uploads();
  const refused: string[] = [];
  const make = (name: string, markedAt: number) => new Upload(markedAt, () => refused.push(name));
  const a = make('a', 10);
  const b = make('b', 20);
  const c = make('c', 30);
  const d = make('d', 40);
  for (const u of [a, b, c, d]) list.add(u);
  list.add(b); // twice: still once
  t.equal(list.size, 4);
  list.delete(c); // from the middle
  list.delete(c); // again: nothing
  t.equal(list.size, 3);
  const slow = list.takeMarkedBefore(25);
  t.same(slow.map((u) => u.markedAt).sort(), [10, 20], 'marked before 25: a and b');
  t.equal(list.size, 1, 'taken out of the list');
  for (const u of slow) u.tooSlow();
  t.same(refused.sort(), ['a', 'b']);
  list.delete(a); // already taken: nothing
  t.equal(list.size, 1);
  d.markedAt = 100; // a body that keeps coming is marked again
  t.same(list.takeMarkedBefore(50), [], 'd was marked again: not slow');
  list.delete(d);
  t.equal(list.size, 0);
  list.add(a); // an upload can be listed again once out
  t.same(list.takeMarkedBefore(1000), [a]);
  t.equal(list.size, 0);
});
