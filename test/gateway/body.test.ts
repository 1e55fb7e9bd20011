// Request bodies while they arrive (src/gateway/body.ts): memory that follows the bytes, whatever the
// chunking, and one budget for all bodies being gathered.
import t from 'tap';
import { BodyBudget, BodyCollector } from '../../src/gateway/body.js';

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
