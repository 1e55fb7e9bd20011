// Flow control in the simulator: the workload's classes (--priority-mix), the gateway's wait queue modelled
// in virtual time with the same pure WaitQueue, and the figures per class. Under about 3× the pool's
// capacity, critical requests keep a time to first token within 2× their unloaded p99 and none is refused,
// while sheddable ones take the refusals; without the queue critical requests are refused like the rest.
// Virtual time and a fixed seed: the figures are exact, so they are asserted (src/sim/README.md has the
// full-size run).
import t from 'tap';
import { generateWorkload, runSimulation, simulateMain } from '../../src/sim/index.js';
import { parsePriorityMix, withPriorities } from '../../src/sim/priority.js';

const mix = parsePriorityMix('critical=0.2,standard=0.5,sheddable=0.3');
const base = generateWorkload('no-sharing', { seed: 1, requests: 1500 });
const requests = withPriorities(base, mix, 1);
// a pool whose engines run 16 sequences (and the pool says so), saturated at one waiting request
const pool = { max_num_seqs: 16, saturation: { queue_depth: 1, kv_cache: 0.9 } };
const profile = { maxNumSeqs: 16 };
const queue = { maxLength: 200, maxWaitMs: 10_000 };
const run = (rateScale: number, withQueue: boolean) =>
  runSimulation({ requests, policies: ['scored'], pool, profile, rateScale, queue: withQueue ? queue : undefined, priorityMix: mix }).runs[0];

t.test('--priority-mix gives classes by their shares and changes nothing else', async (t) => {
  t.same(mix, { critical: 0.2, standard: 0.5, sheddable: 0.3 });
  t.same(parsePriorityMix('critical=1,standard=1'), { critical: 0.5, standard: 0.5, sheddable: 0 }, 'shares are normalised');
  t.throws(() => parsePriorityMix('urgent=1'), /CLASS=SHARE/);
  t.throws(() => parsePriorityMix('critical=0'), /above 0/);
  const count = (p: string) => requests.filter((r) => r.priority === p).length / requests.length;
  t.ok(Math.abs(count('critical') - 0.2) < 0.04 && Math.abs(count('sheddable') - 0.3) < 0.04, 'drawn shares near the mix');
  t.same(requests.map(({ priority: _p, ...r }) => r), base, 'arrivals, sizes and prompts are those of the workload without a mix');
  t.same(withPriorities(base, mix, 1), requests, 'the same seed draws the same classes');
});

t.test('3× overload with the queue: critical keeps its TTFT and is never refused; sheddable absorbs the refusals', async (t) => {
  const unloaded = run(0.5, true);
  const overload = run(5.5, true);
  const u = unloaded.per_priority!;
  const o = overload.per_priority!;
  t.equal(unloaded.rejected, 0, 'unloaded: nothing refused');
  t.equal(u.critical.queued, 0, 'and nothing waited');
  t.ok(overload.rejected > requests.length / 3, `overloaded: ${overload.rejected} of ${requests.length} refused`);
  t.equal(o.critical.rejected, 0, 'no critical request refused');
  t.equal(o.critical.completed, o.critical.requests, 'every critical request completed');
  t.ok(o.critical.queued > 0, `${o.critical.queued} critical requests waited in the gateway`);
  t.ok(o.critical.ttft_ms.p99 <= 2 * u.critical.ttft_ms.p99, `critical TTFT p99 ${o.critical.ttft_ms.p99} ms ≤ 2 × unloaded ${u.critical.ttft_ms.p99} ms`);
  t.ok(o.sheddable.rejected / o.sheddable.requests > 0.8, `sheddable: ${o.sheddable.rejected} of ${o.sheddable.requests} refused`);
  t.ok(o.sheddable.rejected / o.sheddable.requests > o.standard.rejected / o.standard.requests, 'a larger share of sheddable than of standard refused');
  t.equal(o.sheddable.queued, 0, 'sheddable never waits');
  t.ok(o.standard.queue_wait_ms.p99 <= queue.maxWaitMs, 'no wait past max_wait');
});

t.test('without the queue every class is refused alike', async (t) => {
  const o = run(5.5, false).per_priority!;
  t.ok(o.critical.rejected > 0, `critical: ${o.critical.rejected} refused`);
  t.equal(o.critical.queued + o.standard.queued, 0);
});

t.test('simulate --priority-mix: per-class lines and JSON; a bad mix is a usage error', async (t) => {
  let out = '';
  let err = '';
  const io = { out: (s: string) => void (out += s), err: (s: string) => void (err += s) };
  const code = await simulateMain(['--generate', 'no-sharing', '--requests', '200', '--policies', 'scored', '--priority-mix', 'critical=0.5,sheddable=0.5', '--queue-max-length', '10', '--queue-max-wait', '2s'], io);
  t.equal(code, 0, err);
  t.match(out, /per class: policy class requests done rejected queued/);
  t.match(out, /scored critical \d+ \d+ \d+ \d+/);
  err = '';
  t.equal(await simulateMain(['--generate', 'no-sharing', '--priority-mix', 'vip=1'], io), 2);
  t.match(err, /--priority-mix takes CLASS=SHARE/);
});

t.test("simulate --config models the config pool's wait queue; the flags override it", async (t) => {
  const dir = t.testdir({
    'queue.yaml':
      'auth: { mode: none, allow_unauthenticated: true }\nmodels: [{ name: m, pool: p }]\n' +
      'pools: { p: { endpoints: ["127.0.0.1:1"], max_num_seqs: 16, saturation: { queue_depth: 1, kv_cache: 0.9 }, queue: { max_length: 10, max_wait: 2s } } }\n',
    'plain.yaml':
      'auth: { mode: none, allow_unauthenticated: true }\nmodels: [{ name: m, pool: p }]\n' +
      'pools: { p: { endpoints: ["127.0.0.1:1"], max_num_seqs: 16, saturation: { queue_depth: 1, kv_cache: 0.9 } } }\n',
  });
  const io = { out: () => {}, err: (s: string) => void t.comment(s) };
  const sim = async (name: string, ...extra: string[]) => {
    const json = `${dir}/${name}.json`;
    const args = ['--generate', 'no-sharing', '--requests', '300', '--rate-scale', '5.5', '--policies', 'scored', '--max-num-seqs', '16', '--priority-mix', 'critical=0.5,sheddable=0.5', '--json', json, ...extra];
    t.equal(await simulateMain(args, io), 0);
    const { readFileSync } = await import('node:fs');
    return JSON.parse(readFileSync(json, 'utf8')) as { workload: { queue?: unknown }; runs: Array<{ rejected: number; per_priority: Record<string, { queued: number }> }> };
  };
  const fromConfig = await sim('config', '--config', `${dir}/queue.yaml`);
  const fromFlags = await sim('flags', '--config', `${dir}/plain.yaml`, '--queue-max-length', '10', '--queue-max-wait', '2s');
  const off = await sim('off', '--config', `${dir}/queue.yaml`, '--queue-max-length', '0');
  t.same(fromConfig.workload.queue, { max_length: 10, max_wait_ms: 2000 }, 'the result says which queue ran');
  t.ok(fromConfig.runs[0].per_priority.critical.queued > 0, 'critical requests waited in the modelled queue');
  t.same(fromConfig, fromFlags, 'the same run as with the flags');
  t.equal(off.workload.queue, undefined, '--queue-max-length 0 turns the config queue off');
  t.equal(off.runs[0].per_priority.critical.queued, 0);
  const crit = (r: typeof off) => (r.runs[0].per_priority.critical as unknown as { rejected: number }).rejected;
  t.ok(crit(off) > crit(fromConfig), `without it more critical requests are refused (${crit(off)} against ${crit(fromConfig)})`);
});
