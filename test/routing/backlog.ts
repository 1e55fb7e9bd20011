// Saturation on the prefill backlog (saturation.max_prefill_backlog): an engine with vLLM's 256 seats admits
// nearly everything into its batch, so its scraped queue stays at 0 and its KV use low while the prefill work
// ahead of a new request grows. The pool refuses once every endpoint has more of that work ahead than the
// bound, in time at the speed observed there; a burst into idle pods is still admitted.
import t from 'tap';
import { seq, ok } from '../helpers/routing.js';
import { Router, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.1, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const EPS = ['a:1', 'b:1'];
// distinct openings: no prompt shares a prefix block with another
const req = (tag: string, tokens: number) => ({ model: 'm', promptText: `${tag}: summarise the report. `.repeat(8), promptTokens: tokens });

/** A pool of two whose prefill speed has been observed on both: 4000 tokens in 1000 ms, 4 tokens per ms. */
function warmPool(maxBacklog: string | number = '1500ms', ownPrefillShare?: number): Router {
  const tuning = ownPrefillShare === undefined ? undefined : { ownPrefillShare };
  const r = Router.fromPool('p', { saturation: { queue_depth: 5, kv_cache: 0.8, max_prefill_backlog: maxBacklog } }, EPS, { random: seq(2), tuning });
  for (const e of EPS) r.updateSignals(e, sig(), 0);
  // two at once: the second goes to the other endpoint (the first one's is busy)
  const warm = [0, 1].map((i) => ok(r.pick('p', req(`warm ${i}`, 4000), 0)));
  if (warm[0].endpoint === warm[1].endpoint) throw new Error('both warm-up requests on one endpoint');
  for (const tk of warm) r.onFirstByte(tk, 1000);
  for (const tk of warm) r.onEnd(tk, 1100, 'ok');
  return r;
}

type Dbg = Record<string, { endpoints: Array<{ endpoint: string; prefill_backlog_ms: number; saturated: boolean; queued: number }> }>;
const backlogs = (r: Router, now: number) => (r.debugPools(now) as Dbg).p.endpoints.map((e) => e.prefill_backlog_ms);

t.test('prefill work ahead over the bound on every endpoint: saturated, though no queue shows', async (t) => {
  // the work ahead alone here (the request's own prefill counts too: the next test)
  const r = warmPool('1500ms', 0);
  t.same(backlogs(r, 2000), [0, 0], 'the speed is learned, nothing is ahead');
  // four long prompts at t = 2000: two per endpoint, 8000 tokens = 2000 ms of prefill ahead on each (the
  // fourth still fits: one endpoint is under the bound when it comes)
  const held = Array.from({ length: 4 }, (_, i) => ok(r.pick('p', req(`long ${i}`, 4000), 2000)));
  // the scrape shows them all in the running batch: nothing waiting, KV low (the 256-seat picture)
  for (const e of EPS) r.updateSignals(e, sig({ running: 2, waiting: 0, kvUsage: 0.2 }), 2010);
  const dbg = (r.debugPools(2010) as Dbg).p.endpoints;
  t.same(dbg.map((e) => e.queued), [0, 0], 'no queue on the evidence the queue test reads');
  t.same(dbg.map((e) => e.saturated), [false, false], 'neither saturated by queue or KV');
  for (const b of backlogs(r, 2010)) t.ok(b > 1500, `backlog ${b} ms over 1500`);
  const res = r.pick('p', req('next', 500), 2010);
  t.equal(res.kind, 'saturated', 'refused on the backlog');
  if (res.kind === 'saturated') t.equal(res.retryAfterS, 1, 'Retry-After: the ≈ 0.5 s beyond the bound, rounded up');
  // the same traffic with the bound off: admitted
  const off = warmPool(0);
  for (let i = 0; i < 4; i++) ok(off.pick('p', req(`long ${i}`, 4000), 2000));
  for (const e of EPS) off.updateSignals(e, sig({ running: 2, waiting: 0, kvUsage: 0.2 }), 2010);
  t.equal(off.pick('p', req('next', 500), 2010, { dryRun: true }).kind, 'ok', 'max_prefill_backlog 0s: off');
  // time passes, the head prefills at the observed speed: under the bound again
  t.equal(r.pick('p', req('later', 500), 2600, { dryRun: true }).kind, 'ok', '0.6 s later ≈ 1400 ms are ahead: admitted');
  // first bytes drain it too
  for (const tk of held) r.onFirstByte(tk, 2100);
  t.same(backlogs(r, 2100), [0, 0], 'first bytes came: nothing ahead');
  t.equal(r.pick('p', req('after', 500), 2100, { dryRun: true }).kind, 'ok');
});

t.test("the request's own prefill counts, up to half the bound: under load a long prompt is refused where a short one is taken", async (t) => {
  const r = warmPool();
  // 1000 ms ahead on each endpoint (4000 tokens at 4 per ms)
  for (let i = 0; i < 2; i++) ok(r.pick('p', req(`ahead ${i}`, 4000), 2000));
  t.same(backlogs(r, 2000), [1000, 1000]);
  // 1000 + 1000 ms of its own, counted up to 750 (half of 1500): over the bound on both
  const long = r.pick('p', req('long', 4000), 2000, { dryRun: true });
  t.equal(long.kind, 'saturated', 'a 4000-token prompt: 1000 + 750 > 1500');
  // 1000 + 250 ms: under
  t.equal(r.pick('p', req('short', 1000), 2000, { dryRun: true }).kind, 'ok', 'a 1000-token prompt: 1000 + 250 ≤ 1500');
  t.equal(r.pick('p', req('edge', 2000), 2000, { dryRun: true }).kind, 'ok', 'a 2000-token prompt: 1000 + 500, at the bound, not over it');
  t.equal(r.pick('p', req('edge+', 2100), 2000, { dryRun: true }).kind, 'saturated', 'a 2100-token prompt: 1000 + 525, over');
  // nothing ahead: any prompt is taken, however long (its own part is capped below the whole bound)
  const idle = warmPool();
  t.equal(idle.pick('p', req('huge', 64000), 2000, { dryRun: true }).kind, 'ok', 'a 64k-token prompt into an idle pool: 0 + 750 ≤ 1500');
  // ownPrefillShare 0: the work ahead alone, as before
  const off = warmPool('1500ms', 0);
  for (let i = 0; i < 2; i++) ok(off.pick('p', req(`ahead ${i}`, 4000), 2000));
  t.equal(off.pick('p', req('long', 4000), 2000, { dryRun: true }).kind, 'ok', 'ownPrefillShare 0: 1000 ≤ 1500');
});

t.test('one endpoint under the bound takes the request; the Retry-After is the excess backlog', async (t) => {
  const r = warmPool();
  // a long prompt each (12000 tokens: 3000 ms ahead), then one more that only one of them takes
  ok(r.pick('p', req('x 0', 4000), 2000));
  t.same(backlogs(r, 2000).sort(), [0, 1000], 'one endpoint 1000 ms ahead, the other idle');
  ok(r.pick('p', req('x 1', 4000), 2000));
  t.same(backlogs(r, 2000), [1000, 1000]);
  t.equal(r.pick('p', req('y', 500), 2000, { dryRun: true }).kind, 'ok', 'both under: admitted');
  const r2 = warmPool();
  ok(r2.pick('p', req('big 0', 24000), 2000));
  t.equal(r2.pick('p', req('big 1', 24000), 2000).kind, 'ok', 'one endpoint 6000 ms ahead, the other idle: admitted');
  const res = r2.pick('p', req('w', 500), 2000);
  t.equal(res.kind, 'saturated', '6000 ms ahead on both');
  if (res.kind === 'saturated') t.equal(res.retryAfterS, 5, 'Retry-After: 4.5 s beyond the bound, rounded up');
});

t.test('a burst into idle pods is admitted: short prompts stay under the bound, and no speed observed means no bound', async (t) => {
  const r = warmPool();
  const rs = Array.from({ length: 40 }, (_, i) => r.pick('p', req(`short ${i}`, 200), 2000));
  t.equal(rs.filter((x) => x.kind === 'ok').length, 40, '40 short prompts onto two idle pods (1000 ms ahead each at most)');
  // a pool that has not yet seen a first byte on its endpoints cannot turn tokens into time: the seats and
  // the overdue rule bound a flood there (test/routing/saturation.ts), not a guessed speed
  const cold = Router.fromPool('p', {}, EPS, { random: seq(5) });
  for (const e of EPS) cold.updateSignals(e, sig(), 0);
  const long = Array.from({ length: 20 }, (_, i) => cold.pick('p', req(`cold ${i}`, 4000), 10));
  t.equal(long.filter((x) => x.kind === 'ok').length, 20, '20 long prompts into idle pods of unknown speed: admitted');
  t.same(backlogs(cold, 10), [0, 0], 'no speed observed: no backlog figure');
});
