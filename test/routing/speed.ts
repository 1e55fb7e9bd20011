import t from 'tap';
import { performance } from 'node:perf_hooks';
import { benchPick } from '../../src/routing/bench-support.js';

// A smoke check of the picker's speed and memory bound (the real numbers come from `npm run bench`):
// generous limits, because CI machines are shared and noisy.
t.test('pick on 64 endpoints, a ~200k-block index, 16k-char prompts', async (t) => {
  const r = benchPick({ clock: () => performance.now(), picks: 3000 });
  t.comment(JSON.stringify(r));
  t.ok(r.index.blocks >= 150_000, `index filled: ${r.index.blocks}`);
  t.ok(r.index.approxBytes < 64 * 1024 * 1024, `index memory: ${r.index.approxBytes} bytes`);
  t.ok(r.us.p50 < 1000, `p50 ${r.us.p50} µs`);
});
