// Saturation rests on evidence (hardening item 10, "false 429s on bursts to idle pods"): a burst into idle
// pods is admitted whatever its size relative to queue_depth; a scraped queue, in-flight work beyond a known
// batch capacity and requests long past the endpoint's time to first byte still saturate.
import t from 'tap';
import { seq } from '../helpers/routing.js';
import { Router, POLICY_NAMES, type EndpointSignals, type PickResult, type Ticket } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.05, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const EPS = ['a:1', 'b:1'];
const req = (i: number) => ({ model: 'm', promptText: `request ${i}: write an essay about the sea. `.repeat(20), promptTokens: 220 });
const SAT = { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' as const };

function idlePool(extra: Record<string, unknown> = {}): Router {
  const r = Router.fromPool('p', { saturation: SAT, ...extra }, EPS, { random: seq(3) });
  for (const e of EPS) r.updateSignals(e, sig(), 0);
  return r;
}

function burst(r: Router, n: number, now: number, opts: { policy?: (typeof POLICY_NAMES)[number] } = {}): PickResult[] {
  return Array.from({ length: n }, (_, i) => r.pick('p', req(i), now, opts));
}

const kinds = (rs: PickResult[]) => rs.map((x) => x.kind);
const count = (rs: PickResult[], kind: string) => rs.filter((x) => x.kind === kind).length;

t.test('20 simultaneous requests onto 2 idle endpoints with fresh zero-queue signals: none saturated', async (t) => {
  for (const policy of POLICY_NAMES) {
    const r = idlePool();
    const rs = burst(r, 20, 10, { policy });
    t.equal(count(rs, 'ok'), 20, `${policy}: all 20 admitted (${JSON.stringify(kinds(rs))})`);
    const dbg = (r.debugPools(10) as Record<string, { endpoints: Array<{ saturated: boolean; queued: number; in_flight: number }> }>).p;
    t.same(dbg.endpoints.map((e) => e.saturated), [false, false], `${policy}: debug shows neither saturated`);
    t.same(dbg.endpoints.map((e) => e.queued), [0, 0], `${policy}: no evidence of a queue`);
    t.equal(dbg.endpoints.reduce((s, e) => s + e.in_flight, 0), 20);
  }
  // a burst of 200 too: the count in flight alone is never the evidence
  t.equal(count(burst(idlePool(), 200, 10), 'ok'), 200);
  // but a flood beyond vLLM's default batch (256 seats) per endpoint before any scrape shows it is bounded:
  // 256 run, 5 wait, on each
  t.equal(count(burst(idlePool(), 600, 10), 'ok'), 2 * (256 + 5), 'a flood of 600: 2 × (256 + 5) admitted');
});

t.test('a scraped queue at or over queue_depth saturates; below it does not', async (t) => {
  const r = idlePool();
  burst(r, 20, 10);
  // the next scrapes show the burst running, then a real queue on both
  r.updateSignals('a:1', sig({ running: 10 }), 100);
  r.updateSignals('b:1', sig({ running: 10, waiting: 4 }), 100);
  t.equal(r.pick('p', req(100), 101, { dryRun: true }).kind, 'ok', 'waiting 0 and 4 < 5');
  r.updateSignals('a:1', sig({ running: 10, waiting: 5 }), 200);
  r.updateSignals('b:1', sig({ running: 10, waiting: 9 }), 200);
  for (const policy of POLICY_NAMES) {
    const res = r.pick('p', req(200), 201, { policy });
    t.equal(res.kind, 'saturated', policy);
    if (res.kind === 'saturated') t.ok(res.retryAfterS >= 1 && res.retryAfterS <= 60, `Retry-After ${res.retryAfterS}`);
  }
  // KV use is evidence too
  r.updateSignals('a:1', sig({ kvUsage: 0.9 }), 300);
  r.updateSignals('b:1', sig({ kvUsage: 0.85 }), 300);
  t.equal(r.pick('p', req(300), 301).kind, 'saturated', 'KV ≥ kv_cache on both');
  r.updateSignals('b:1', sig({ kvUsage: 0.5 }), 400);
  const res = r.pick('p', req(400), 401);
  t.equal(res.kind === 'ok' && res.endpoint, 'b:1', 'the one below both thresholds takes it');
});

t.test('requests stuck without a first byte long past the recent TTFT saturate', async (t) => {
  const r = idlePool();
  // learn a TTFT of 50 ms on both
  for (let i = 0; i < 4; i++) {
    const res = r.pick('p', req(-i), 0);
    if (res.kind !== 'ok') throw new Error(res.kind);
    r.onFirstByte(res.ticket, 50);
    r.onEnd(res.ticket, 60, 'ok');
  }
  for (const e of EPS) r.updateSignals(e, sig(), 100);
  const stuck = burst(r, 12, 100);
  t.equal(count(stuck, 'ok'), 12);
  t.equal(r.pick('p', req(1), 140, { dryRun: true }).kind, 'ok', '40 ms later: not yet late (TTFT 50 ms)');
  t.equal(r.pick('p', req(1), 300, { dryRun: true }).kind, 'ok', '200 ms later: past 2 × TTFT but within the 250 ms floor');
  // the prefill speed seen (220 tokens in 50 ms) says the sixth on each waits 300 ms for its turn: a request
  // is late only beyond that (test/routing/saturation-evidence.ts)
  t.equal(r.pick('p', req(2), 400, { dryRun: true }).kind, 'ok', '300 ms later: past the floor, not past their expected prefill');
  const late = r.pick('p', req(2), 700, { dryRun: true });
  t.equal(late.kind, 'saturated', '600 ms later, six of ours on each still without a first byte: saturated');
  // first bytes arrive: the evidence goes
  for (const x of stuck) if (x.kind === 'ok') r.onFirstByte(x.ticket, 710);
  t.equal(r.pick('p', req(3), 720, { dryRun: true }).kind, 'ok', 'their first bytes came: admitted again');
});

t.test('metrics gone stale: overdue requests are the evidence, a plain count is not', async (t) => {
  const r = Router.fromPool('p', { saturation: SAT, metrics: { stale_after: '1s' } }, EPS, { random: seq(4) });
  const held: Ticket[] = [];
  for (const x of burst(r, 20, 0)) if (x.kind === 'ok') held.push(x.ticket);
  t.equal(held.length, 20, 'no metrics at all, TTFT unknown: a burst of 20 is admitted');
  t.equal(r.pick('p', req(0), 1000, { dryRun: true }).kind, 'ok', 'a second on: not late for the assumed 1 s TTFT');
  t.equal(r.pick('p', req(0), 2500, { dryRun: true }).kind, 'saturated', '2.5 s without a first byte: late on both');
  for (const tk of held) r.onEnd(tk, 2600, 'aborted');
  t.equal(r.pick('p', req(0), 2700, { dryRun: true }).kind, 'ok', 'once they end, nothing waits');
});

t.test('a known batch capacity (max_num_seqs) makes the requests beyond its free seats wait', async (t) => {
  const r = idlePool({ max_num_seqs: 4 });
  const rs = burst(r, 30, 10);
  // per endpoint: 4 seats run, 5 more wait, the 10th sees a queue of 5
  t.equal(count(rs, 'ok'), 18, `2 × (4 + 5) admitted: ${JSON.stringify(kinds(rs))}`);
  t.equal(count(rs, 'saturated'), 12);
  // a scrape that shows the batch running and the queue: the same answer on the scraped figures
  r.updateSignals('a:1', sig({ running: 4, waiting: 5 }), 100);
  r.updateSignals('b:1', sig({ running: 4, waiting: 5 }), 100);
  t.equal(r.pick('p', req(0), 101, { dryRun: true }).kind, 'saturated');
  // the scrape shows seats free again: admitted up to them plus the queue depth
  r.updateSignals('a:1', sig({ running: 1 }), 200);
  r.updateSignals('b:1', sig({ running: 4, waiting: 5 }), 200);
  const more = burst(r, 10, 201);
  t.equal(count(more, 'ok'), 3 + 5, 'a: 3 free seats, then 5 waiting');
  // a capacity the endpoint reports wins over the configured one
  const rep = idlePool({ max_num_seqs: 1 });
  for (const e of EPS) rep.updateSignals(e, sig({ maxNumSeqs: 16 }), 5);
  t.equal(count(burst(rep, 40, 10), 'ok'), 40, 'reported 16 seats each (+5 queue): 40 fit');
});

t.test('the bookkeeping of pending requests stays bounded under steady traffic', async (t) => {
  const r = idlePool();
  const open: Ticket[] = [];
  let now = 0;
  for (let i = 0; i < 20_000; i++) {
    now += 1;
    const res = r.pick('p', req(i % 50), now);
    if (res.kind !== 'ok') throw new Error(`${res.kind} at ${i}`);
    open.push(res.ticket);
    if (open.length > 8) {
      const tk = open.shift()!;
      r.onFirstByte(tk, now);
      r.onEnd(tk, now, 'ok');
    }
    if (i % 100 === 0) for (const e of EPS) r.updateSignals(e, sig({ running: 4 }), now);
  }
  const st = r.pool('p').state('a:1')!;
  t.ok(st.pendingQ.length - st.pendingHead <= 2 * st.pending + 65, `queue ${st.pendingQ.length - st.pendingHead} for ${st.pending} pending`);
});

t.test('a saturated pool still sends on a prompt longer than every server takes (its 400 costs nothing), never one that fits', async (t) => {
  const r = Router.fromPool('p', { saturation: SAT }, EPS, { random: seq(3) });
  for (const e of EPS) r.updateSignals(e, sig({ waiting: 9, maxModelLen: 4096 }), 0); // both over queue_depth
  const long = (tokens: number) => ({ model: 'm', promptText: 'x'.repeat(tokens * 4), promptTokens: tokens });
  t.equal(r.pick('p', long(4096), 10).kind, 'saturated', 'at max_model_len: it fits, so it waits its turn like any other');
  const over = r.pick('p', long(5000), 10);
  t.equal(over.kind, 'ok', 'over every server\'s max_model_len: sent on, for the server\'s own 400');
  if (over.kind === 'ok') r.onEnd(over.ticket, 20, 'ok');
  // it goes where the least is in flight
  const held = r.pick('p', long(5000), 30);
  t.equal(held.kind, 'ok');
  const next = r.pick('p', long(5000), 31);
  t.ok(held.kind === 'ok' && next.kind === 'ok' && held.endpoint !== next.endpoint, 'the next one to the other endpoint (the least in flight)');
  // one server longer: the prompt may fit there, so no exception
  r.updateSignals('b:1', sig({ waiting: 9, maxModelLen: 8192 }), 40);
  t.equal(r.pick('p', long(5000), 41).kind, 'saturated', 'a server with a longer context could take it: 429 as usual');
  // one server that has not said: the same
  r.updateSignals('b:1', sig({ waiting: 9 }), 50);
  t.equal(r.pick('p', long(50_000), 51).kind, 'saturated', 'a server whose max_model_len is unknown might take it');
});
