import t from 'tap';
import { PrefixIndex } from '../../src/routing/index.js';
import { mulberry32 } from '../../src/common/random.js';

/** Chains from a small tree of prefixes; `hashRange` small forces 32-bit-style collisions. */
function chainOf(r: () => number, hashRange: number): Uint32Array {
  const n = 1 + Math.floor(r() * 12);
  const root = Math.floor(r() * 4);
  const out = new Uint32Array(n);
  let h = root + 1;
  for (let i = 0; i < n; i++) {
    const branch = i < 3 ? 0 : Math.floor(r() * 3);
    h = (Math.imul(h ^ (branch + 1), 0x9e3779b1) >>> 0) % hashRange;
    out[i] = h;
  }
  return out;
}

t.test('random inserts, evictions, removals keep the index consistent', async (t) => {
  for (const [hashRange, stride] of [[0xffffffff, 1], [97, 1], [0xffffffff, 3], [97, 3]]) {
    const r = mulberry32(hashRange + stride);
    const idx = new PrefixIndex({ capacityPerEndpoint: 40 * stride, maxTotal: 100 * stride, stride });
    const out = new Int32Array(8);
    const eps = [0, 1, 2, 3, 4, 5, 6, 7];
    for (let i = 0; i < 4000; i++) {
      const c = chainOf(r, hashRange);
      const ep = Math.floor(r() * 8);
      if (r() < 0.5) idx.match(c, eps, out);
      idx.insert(c, ep, i);
      if (hashRange > 1000) {
        idx.match(c, eps, out);
        if (out[ep] !== c.length && idx.blocksOf(ep) >= c.length) t.fail(`inserted chain not matched in full (${out[ep]}/${c.length})`);
      }
      if (i % 500 === 250) idx.removeEndpoint(Math.floor(r() * 8));
      if (i % 700 === 350) idx.setCapacity(Math.floor(r() * 8), 5 + Math.floor(r() * 40));
      if (i % 97 === 0) {
        const bad = idx.checkInvariants();
        if (bad) {
          t.fail(`step ${i} (hash range ${hashRange}): ${bad}`);
          return;
        }
      }
      if (idx.stats().blocks > 100 * stride) t.fail('global bound');
    }
    t.equal(idx.checkInvariants(), null, `consistent (hash range ${hashRange}, stride ${stride})`);
  }
});

t.test('a dead chain is dropped deepest-first, a touched prefix outlives newer leaves', async (t) => {
  const idx = new PrefixIndex({ capacityPerEndpoint: 8 });
  const a = Uint32Array.from([1, 2, 3, 4]);
  const b = Uint32Array.from([11, 12, 13, 14]);
  const out = new Int32Array(1);
  idx.insert(a, 0);
  idx.insert(b, 0);
  idx.insert(a.subarray(0, 1), 0); // a's root is now the most recent entry
  idx.insert(Uint32Array.from([21, 22]), 0); // 10 > 8: two go, from the least recent leaf up
  idx.match(a, [0], out);
  t.equal(out[0], 2, 'a lost its two deepest');
  idx.match(b, [0], out);
  t.equal(out[0], 4, 'b kept');
  t.equal(idx.checkInvariants(), null);
});

t.test('stride: a chain is matched to whole levels, and in full (its partial last level too) when held', async (t) => {
  const idx = new PrefixIndex({ capacityPerEndpoint: 1000, stride: 4 });
  const long = Uint32Array.from({ length: 10 }, (_, i) => 100 + i);
  const out = new Int32Array(2);
  idx.insert(long, 0);
  idx.match(long, [0, 1], out);
  t.same([out[0], out[1]], [10, 0], 'the whole chain, partial tail included');
  idx.match(long.subarray(0, 9), [0], out);
  t.equal(out[0], 8, 'a shorter chain: whole levels only (its own tail was never seen)');
  idx.insert(long.subarray(0, 3), 1);
  idx.match(long.subarray(0, 3), [0, 1], out);
  t.same([out[0], out[1]], [0, 3], 'a chain shorter than one level is one partial level');
  t.equal(idx.checkInvariants(), null);
});
