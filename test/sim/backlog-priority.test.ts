// Issue #16's target on the default setup (setup C of src/sim/README.md, "Priority classes"): vLLM's 256
// seats and the default saturation thresholds. Such an engine admits nearly everything into its running
// batch, so the queue and KV tests trip late; the prefill-backlog bound (saturation.max_prefill_backlog,
// default 1500ms) makes the pool saturate while the work ahead is still short, and the gateway's queue then
// keeps critical requests within 2× their unloaded TTFT p99. Virtual time and a fixed seed: the figures are
// exact, so they are asserted.
import t from 'tap';
import { generateWorkload, runSimulation } from '../../src/sim/index.js';
import { parsePriorityMix, withPriorities } from '../../src/sim/priority.js';

const mix = parsePriorityMix('critical=0.2,standard=0.5,sheddable=0.3');
const requests = withPriorities(generateWorkload('no-sharing', { seed: 1, requests: 1000 }), mix, 1);
const queue = { maxLength: 200, maxWaitMs: 10_000 };
const run = (rateScale: number, saturation?: { max_prefill_backlog: string }) =>
  runSimulation({ requests, policies: ['scored'], pool: saturation ? { saturation } : undefined, rateScale, queue, priorityMix: mix }).runs[0];

t.test('default engine and config, 3× overload: critical TTFT p99 within 2× unloaded, sheddable refused', async (t) => {
  const u = run(0.5).per_priority!;
  const overload = run(5.5);
  const o = overload.per_priority!;
  t.equal(u.critical.rejected + u.standard.rejected + u.sheddable.rejected, 0, 'unloaded: nothing refused');
  const ratio = o.critical.ttft_ms.p99 / u.critical.ttft_ms.p99;
  t.ok(ratio <= 2, `critical TTFT p99 ${o.critical.ttft_ms.p99} ms = ${ratio.toFixed(2)} × unloaded ${u.critical.ttft_ms.p99} ms`);
  t.equal(o.critical.rejected, 0, 'no critical request refused');
  t.equal(o.critical.completed, o.critical.requests, 'every critical request completed');
  t.ok(o.sheddable.rejected / o.sheddable.requests > 0.8, `sheddable: ${o.sheddable.rejected} of ${o.sheddable.requests} refused`);
  // the same run with the bound off: the queue and KV tests alone trip too late (what the issue measured)
  const off = run(5.5, { max_prefill_backlog: '0s' }).per_priority!;
  t.ok(off.critical.ttft_ms.p99 > 2 * u.critical.ttft_ms.p99, `bound off: critical p99 ${off.critical.ttft_ms.p99} ms, over 2 × unloaded`);
});
