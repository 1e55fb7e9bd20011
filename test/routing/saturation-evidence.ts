// The queue test on the right evidence (issue #17, shed share on bursts): where the prefill-backlog bound can
// judge an endpoint (it is on, and a prefill speed has been observed there), a queue that forms for prefill is
// the bound's to weigh, so a queue of requests whose prompt is cached — little work — refuses nothing. The
// queue test still counts what the backlog does not see: requests beyond the seats of a small batch, and
// requests late for their first byte by more than the prefill they were expected to wait for.
import t from 'tap';
import { seq, ok } from '../helpers/routing.js';
import { Router, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.2, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const EPS = ['a:1', 'b:1'];
const other = (ep: string) => new Set(EPS.filter((e) => e !== ep));
const SYSTEM = 'You are a careful analyst of shipping manifests. '.repeat(640); // ≈ 31k chars, ≈ 8k tokens
const withPrefix = (q: string) => ({ model: 'm', promptText: SYSTEM + q, promptTokens: Math.ceil((SYSTEM.length + q.length) / 4) });
// distinct openings: no prompt shares a prefix block with another
const plain = (tag: string, tokens: number) => ({ model: 'm', promptText: `${tag}: summarise the report. `.repeat(8), promptTokens: tokens });

/**
 * Two endpoints whose prefill speed and time to first byte have been observed: a 1600-token prompt's first
 * byte 100 ms after dispatch on each (16 tokens per ms; overdue after max(250 ms, 2 × 100 ms)).
 */
function warmPool(pool: Record<string, unknown> = {}): Router {
  const r = Router.fromPool('p', { saturation: { queue_depth: 5, kv_cache: 0.8 }, ...pool }, EPS, { random: seq(7) });
  for (const e of EPS) r.updateSignals(e, sig(), 0);
  for (const e of EPS) {
    const tk = ok(r.pick('p', { ...plain(`warm ${e}`, 1600), exclude: other(e) }, 0));
    r.onFirstByte(tk, 100);
    r.onEnd(tk, 200, 'ok');
  }
  return r;
}

type Dbg = Record<string, { endpoints: Array<{ queued: number; saturated: boolean; prefill_backlog_ms: number }> }>;
const dbg = (r: Router, now: number) => (r.debugPools(now) as Dbg).p.endpoints;

t.test('a queue of cached-prefix requests on endpoints with free seats: not saturated', async (t) => {
  const run = (maxBacklog?: string) => {
    const r = warmPool(maxBacklog === undefined ? {} : { saturation: { queue_depth: 5, kv_cache: 0.8, max_prefill_backlog: maxBacklog } });
    // on each endpoint: one request prefilling the 8k-token prefix (≈ 500 ms at 16 tokens/ms), then five
    // more with the same prefix, cached once the first is done
    for (const e of EPS) for (let i = 0; i < 6; i++) ok(r.pick('p', { ...withPrefix(`question ${e} ${i}`), exclude: other(e) }, 2000));
    // what vLLM shows then: the head runs, the five wait for the step budget the head's chunks take
    for (const e of EPS) r.updateSignals(e, sig({ running: 1, waiting: 5 }), 2010);
    return r;
  };
  const r = run();
  const d = dbg(r, 2010);
  for (const e of d) t.ok(e.prefill_backlog_ms > 400 && e.prefill_backlog_ms < 600, `backlog ${e.prefill_backlog_ms} ms: the head's prefix, the cached ones little`);
  t.same(d.map((e) => e.queued), [0, 0], 'five waiting with 250 seats free: no queue the backlog does not weigh');
  t.same(d.map((e) => e.saturated), [false, false]);
  t.equal(r.pick('p', withPrefix('question next'), 2010, { dryRun: true }).kind, 'ok', 'admitted');
  // the same picture with the bound off: the scraped queue is the evidence again, and the pool refuses
  const off = run('0s');
  t.same(dbg(off, 2010).map((e) => e.queued), [5, 5]);
  t.equal(off.pick('p', withPrefix('question next'), 2010, { dryRun: true }).kind, 'saturated', 'max_prefill_backlog 0s: the queue count decides');
});

t.test('a small-batch engine with a real waiting queue: saturated', async (t) => {
  const r = warmPool({ max_num_seqs: 4 });
  // every seat taken and five waiting on both: they wait for sequences to end, which no prefill figure shows
  for (const e of EPS) r.updateSignals(e, sig({ running: 4, waiting: 5 }), 1000);
  const d = dbg(r, 1000);
  t.same(d.map((e) => e.prefill_backlog_ms), [160, 160], 'little prefill ahead (5 foreign prompts of 512 tokens)');
  t.same(d.map((e) => e.queued), [5, 5], 'five beyond the four seats');
  const res = r.pick('p', plain('next', 200), 1000);
  t.equal(res.kind, 'saturated', 'refused');
  if (res.kind === 'saturated') t.ok(res.retryAfterS >= 1 && res.retryAfterS <= 60);
  // two seats free: of the five waiting, three wait for a seat (under queue_depth 5)
  for (const e of EPS) r.updateSignals(e, sig({ running: 2, waiting: 5 }), 1100);
  t.same(dbg(r, 1100).map((e) => e.queued), [3, 3]);
  t.equal(r.pick('p', plain('next', 200), 1100, { dryRun: true }).kind, 'ok', 'three waiting for a seat: admitted');
  // each request sent since the scrape wants a seat too: two more per endpoint make five beyond the seats
  const burst = Array.from({ length: 20 }, (_, i) => r.pick('p', plain(`burst ${i}`, 200), 1100));
  t.equal(burst.filter((x) => x.kind === 'ok').length, 2 * 2, 'two admitted per endpoint, then refused');
});

t.test('late for a first byte: counted once past the prefill the request was expected to wait for', async (t) => {
  const run = (maxBacklog?: string) => {
    const r = warmPool(maxBacklog === undefined ? {} : { saturation: { queue_depth: 5, kv_cache: 0.8, max_prefill_backlog: maxBacklog } });
    // on each endpoint a 16k-token prompt (≈ 1000 ms of prefill) and five short ones behind it
    for (const e of EPS) {
      ok(r.pick('p', { ...plain(`long ${e}`, 16_000), exclude: other(e) }, 2000));
      for (let i = 0; i < 5; i++) ok(r.pick('p', { ...plain(`short ${e} ${i}`, 200), exclude: other(e) }, 2000));
    }
    return r;
  };
  const at = (r: Router, now: number) => {
    for (const e of EPS) r.updateSignals(e, sig({ running: 1, waiting: 5 }), now);
    return { queued: dbg(r, now).map((e) => e.queued), kind: r.pick('p', plain('probe', 200), now, { dryRun: true }).kind };
  };
  const r = run();
  t.same(at(r, 2600), { queued: [0, 0], kind: 'ok' }, '600 ms on: past 2 × the TTFT, but within the 1 s prefill ahead of them');
  t.same(at(r, 3400), { queued: [6, 6], kind: 'saturated' }, '1400 ms on, still no first byte: late beyond their prefill, a stuck engine');
  const off = run('0s');
  t.same(at(off, 2600).kind, 'saturated', 'bound off: the scraped queue decides, as before');
});
