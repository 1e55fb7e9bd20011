// The flow-control wait queue (src/routing/wait-queue.ts), pure: the order waiters are served in (class
// first, tenants taking turns inside a class, each tenant first in first out), removal from anywhere,
// the bound, and a more important waiter displacing the newest of a less important class.
import t from 'tap';
import { WaitQueue, type PriorityClass } from '../../src/routing/index.js';

function served<T>(q: WaitQueue<T>): T[] {
  const out: T[] = [];
  for (let w = q.shift(); w; w = q.shift()) out.push(w.item);
  return out;
}

t.test('critical before standard before sheddable, whatever the arrival order', async (t) => {
  const q = new WaitQueue<string>(10);
  const order: Array<[string, PriorityClass]> = [['s1', 'sheddable'], ['n1', 'standard'], ['c1', 'critical'], ['n2', 'standard'], ['c2', 'critical']];
  for (const [id, p] of order) q.push(id, p, 'one', 0);
  t.equal(q.length, 5);
  t.equal(q.lengthOf('critical'), 2);
  t.same(served(q), ['c1', 'c2', 'n1', 'n2', 's1']);
  t.equal(q.length, 0);
  t.equal(q.peek(), undefined);
});

t.test('tenants take turns inside a class; a tenant flooding first does not starve a later one', async (t) => {
  const q = new WaitQueue<string>(100);
  for (let i = 0; i < 6; i++) q.push(`a${i}`, 'standard', 'A', i);
  for (let i = 0; i < 3; i++) q.push(`b${i}`, 'standard', 'B', 10 + i);
  t.same(served(q), ['a0', 'b0', 'a1', 'b1', 'a2', 'b2', 'a3', 'a4', 'a5']);
});

t.test('a tenant that starts waiting joins at the end of the current round', async (t) => {
  const q = new WaitQueue<string>(100);
  for (const [id, tenant] of [['a0', 'A'], ['a1', 'A'], ['b0', 'B'], ['b1', 'B']]) q.push(id, 'standard', tenant, 0);
  t.equal(q.shift()?.item, 'a0'); // B is next
  q.push('c0', 'standard', 'C', 1);
  t.same(served(q), ['b0', 'a1', 'c0', 'b1']);
});

t.test('remove takes a waiter out from anywhere; the turns stay right', async (t) => {
  const q = new WaitQueue<string>(100);
  const ws = ['a0', 'a1', 'b0', 'c0'].map((id) => q.push(id, 'critical', id[0], 0));
  const b0 = ws[2];
  t.equal(b0.kind, 'queued');
  if (b0.kind !== 'queued') return;
  t.ok(q.remove(b0.waiter), 'removed');
  t.notOk(q.remove(b0.waiter), 'a second remove finds nothing');
  t.equal(q.length, 3);
  t.same(served(q), ['a0', 'c0', 'a1']);
});

t.test('bounded: a full queue refuses an equal or lower class, and a higher class displaces the newest lowest waiter', async (t) => {
  const q = new WaitQueue<string>(3);
  q.push('n1', 'standard', 'A', 0);
  q.push('n2', 'standard', 'B', 1);
  q.push('c1', 'critical', 'A', 2);
  t.same(q.push('n3', 'standard', 'A', 3), { kind: 'full' }, 'standard into a full queue: refused');
  t.same(q.push('c9', 'sheddable', 'A', 3), { kind: 'full' }, 'sheddable too');
  const r = q.push('c2', 'critical', 'C', 4);
  t.equal(r.kind, 'queued');
  t.equal(r.kind === 'queued' ? r.evicted?.item : undefined, 'n2', 'the newest standard waiter made room');
  t.equal(q.length, 3);
  t.same(served(q), ['c1', 'c2', 'n1']);
  const full = new WaitQueue<string>(1);
  full.push('c', 'critical', 'A', 0);
  t.same(full.push('c2', 'critical', 'B', 0), { kind: 'full' }, 'nothing lower to displace: refused');
});

t.test('hasWaiterAtOrAbove says whether a newcomer must queue behind someone', async (t) => {
  const q = new WaitQueue<string>(10);
  t.notOk(q.hasWaiterAtOrAbove('sheddable'));
  q.push('n', 'standard', 'A', 0);
  t.notOk(q.hasWaiterAtOrAbove('critical'), 'a critical newcomer goes before standard waiters');
  t.ok(q.hasWaiterAtOrAbove('standard'));
  t.ok(q.hasWaiterAtOrAbove('sheddable'));
});

t.test('many tenants, random removals: every waiter is served exactly once, each tenant in its own order', async (t) => {
  let s = 7;
  const rnd = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
  const q = new WaitQueue<number>(10_000);
  const handles = [];
  const tenantOf = (i: number) => `t${i % 5}`;
  for (let i = 0; i < 500; i++) {
    const r = q.push(i, rnd() < 0.3 ? 'critical' : 'standard', tenantOf(i), i);
    if (r.kind === 'queued') handles.push(r.waiter);
  }
  const removed = new Set<number>();
  for (const h of handles) if (rnd() < 0.2 && q.remove(h)) removed.add(h.item);
  const out = served(q);
  t.equal(out.length + removed.size, 500, 'none lost, none twice');
  t.equal(new Set(out).size, out.length);
  for (const x of out) if (removed.has(x)) t.fail(`removed ${x} was served`);
  const last = new Map<string, number>();
  let sawStandard = false;
  let ok = true;
  for (const x of out) {
    const w = handles[x];
    if (w.priority === 'standard') sawStandard = true;
    else if (sawStandard) ok = false; // a critical after a standard
    const key = `${w.priority}/${w.tenant}`;
    if ((last.get(key) ?? -1) > x) ok = false; // FIFO per tenant and class
    last.set(key, x);
  }
  t.ok(ok, 'classes in order, each tenant first in first out');
});
