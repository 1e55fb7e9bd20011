import t from 'tap';
import { performance } from 'node:perf_hooks';
import { benchPick } from '../../src/routing/bench-support.js';

// A smoke check of the picker's bench harness and the index's memory bound: no time is asserted (speed
// figures come from `npm run bench -- picker`); the measured times are only printed.
t.test('pick on 64 endpoints, a ~200k-block index, 16k-char prompts', async (t) => {
  const r = benchPick({ clock: () => performance.now(), picks: 3000 });
  t.comment(JSON.stringify(r));
  t.ok(r.index.blocks >= 150_000, `index filled: ${r.index.blocks}`);
  t.ok(r.index.approxBytes < 64 * 1024 * 1024, `index memory: ${r.index.approxBytes} bytes`);
  t.equal(r.picks, 3000, 'every pick answered');
  t.ok(Number.isFinite(r.us.p50) && r.us.p50 > 0, `p50 measured: ${r.us.p50} µs`);
});
