import t from 'tap';
import { BlockHashTable, BlockPool } from '../../src/engine/blocks.js';

t.test('BlockHashTable agrees with Map under random inserts and deletes', async (t) => {
  const tab = new BlockHashTable(64);
  const ref = new Map<number, number>();
  let x = 12345;
  const rnd = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0), x);
  const keyOf = (i: number) => (i * 2654435761) % 9007199254740000 + (i & 7) * 2097152; // collide low bits
  let bad = 0;
  for (let step = 0; step < 20000; step++) {
    const k = keyOf(rnd() % 300);
    const op = rnd() % 3;
    if (op === 0) {
      const v = rnd() % 1000;
      const added = tab.setIfAbsent(k, v);
      if (added !== !ref.has(k)) bad++;
      if (added) ref.set(k, v);
    } else if (op === 1) {
      tab.delete(k);
      ref.delete(k);
    } else if (tab.get(k) !== (ref.get(k) ?? -1)) bad++;
  }
  t.equal(bad, 0);
  t.equal(tab.size, ref.size);
  for (const [k, v] of ref) if (tab.get(k) !== v) bad++;
  t.equal(bad, 0, 'all entries found');
  t.same([...tab.values()].sort(), [...ref.values()].sort());
});

t.test('BlockPool: free queue order, touch, eviction', async (t) => {
  const p = new BlockPool(4);
  const a = p.allocate();
  const b = p.allocate();
  p.register(a, 111);
  p.register(b, 222);
  t.equal(p.numFree, 2);
  p.releaseAll([a, b]); // b freed first: evicted first
  t.equal(p.numFree, 4);
  t.equal(p.lookup(new Float64Array([111, 222]), 2), 2, 'cached free blocks still hit');
  p.allocate();
  p.allocate(); // two never-used blocks
  const c = p.allocate(); // evicts b (least recently freed)
  t.equal(c, b);
  t.equal(p.lookup(new Float64Array([222]), 1), 0);
  t.equal(p.lookup(new Float64Array([111]), 1), 1);
  p.touch(a);
  t.equal(p.numFree, 0);
  t.equal(p.evictions, 1);
  t.throws(() => p.allocate());
});
