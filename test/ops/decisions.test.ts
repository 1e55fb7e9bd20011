// GET /debug/decisions?n=N: the last N routing decisions, newest first, each with every candidate's scores,
// from a ring bounded by admin.decisions; a bad n is a 400 in OpenAI's error shape. And the ring alone.
import t from 'tap';
import { DecisionRing } from '../../src/gateway/decisions.js';
import { startGateway, startMocks, gatewayConfig, chat, longText, scrape, metric } from '../e2e/support.js';

interface DecisionOut {
  req_id: string;
  pool: string;
  outcome: string;
  endpoint: string | null;
  policy: string;
  prompt_blocks: number;
  candidates: Array<{ endpoint: string; scores: Record<string, number>; total: number; matched_blocks: number; cost_tokens: number }>;
}

t.test('the ring keeps the newest entries, newest first, within its capacity', async (t) => {
  const ring = new DecisionRing(3);
  t.same(ring.last(5), [], 'empty');
  for (let i = 1; i <= 5; i++) ring.push({ at: i, req_id: `r${i}`, pool: 'p', model: 'm', outcome: 'ok', attempt: 1 });
  t.equal(ring.size, 3);
  t.same(ring.last(10).map((d) => d.req_id), ['r5', 'r4', 'r3'], 'the three newest');
  t.same(ring.last(2).map((d) => d.req_id), ['r5', 'r4']);
  t.same(ring.last(0), []);
  const none = new DecisionRing(0);
  none.push({ at: 1, req_id: 'x', pool: 'p', model: 'm', outcome: 'ok', attempt: 1 });
  t.same(none.last(1), [], 'capacity 0 keeps nothing');
});

t.test('a live gateway answers the last N decisions with every candidate scored', async (t) => {
  const mocks = await startMocks(2, ['--model', 'test-model', '--time-scale', '20']);
  t.teardown(() => mocks.kill());
  const gw = await startGateway(gatewayConfig(mocks.endpoints, { pool: { policy: 'scored' }, over: { admin: { host: '127.0.0.1', port: 0, decisions: 5 } } }));
  t.teardown(() => gw.stop());
  const prompt = longText('decisions', 2_000); // about 30 prefix blocks, the same each time
  const ids: string[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await chat(gw.url, { model: 'test-model', max_tokens: 2, messages: [{ role: 'user', content: prompt }] });
    t.equal(r.status, 200, `request ${i + 1} answered`);
    ids.push(r.headers.get('x-request-id')!);
  }
  const res = await fetch(`${gw.adminUrl}/debug/decisions?n=3`);
  t.equal(res.status, 200);
  const body = (await res.json()) as { capacity: number; count: number; decisions: DecisionOut[] };
  t.equal(body.capacity, 5, 'capacity from admin.decisions');
  t.equal(body.decisions.length, 3, 'n=3: three decisions');
  t.same(body.decisions.map((d) => d.req_id), ids.slice(-3).reverse(), 'the last three requests, newest first');
  for (const d of body.decisions) {
    t.equal(d.outcome, 'ok');
    t.equal(d.policy, 'scored');
    t.equal(d.pool, 'p');
    t.ok(d.prompt_blocks > 0, 'the prompt was cut into prefix blocks');
    t.same(d.candidates.map((c) => c.endpoint).sort(), [...mocks.endpoints].sort(), 'both endpoints are candidates');
    for (const c of d.candidates) {
      t.type(c.scores.prefix, 'number', `${c.endpoint}: a prefix score`);
      t.type(c.scores.queue, 'number', `${c.endpoint}: a queue score`);
      t.ok(Number.isFinite(c.total) && Number.isFinite(c.cost_tokens), `${c.endpoint}: total and cost`);
    }
    const best = Math.max(...d.candidates.map((c) => c.total));
    t.equal(d.candidates.find((c) => c.endpoint === d.endpoint)?.total, best, 'the chosen endpoint has the highest total');
  }
  // the same prompt again: the chosen endpoint already holds its prefix
  const newest = body.decisions[0];
  t.equal(newest.candidates.find((c) => c.endpoint === newest.endpoint)?.matched_blocks, newest.prompt_blocks, 'the repeated prompt matched whole');

  const all = (await (await fetch(`${gw.adminUrl}/debug/decisions`)).json()) as { decisions: unknown[] };
  t.equal(all.decisions.length, 5, 'without n: all the ring holds (5 here, 50 at most)');
  for (const bad of ['6', '-1', 'abc', '1e3', '']) {
    const r = await fetch(`${gw.adminUrl}/debug/decisions?n=${bad}`);
    t.equal(r.status, 400, `n=${bad}: 400`);
    t.match(await r.json(), { error: { code: 'invalid_field', param: 'n', type: 'invalid_request_error' } });
  }
  const samples = await scrape(gw.adminUrl);
  t.equal(metric(samples, 'infergate_prefix_match_ratio_count', { pool: 'p' }), 8, 'a prefix-match observation per pick');
  t.ok(metric(samples, 'infergate_prefix_match_ratio_sum', { pool: 'p' }) >= 6, 'the repeated prompt mostly matched');
  t.equal(metric(samples, 'infergate_endpoint_requests_total'), 8, 'per-endpoint request counts add up');
  t.equal(metric(samples, 'infergate_endpoint_time_to_first_token_seconds_count'), 8, 'per-endpoint TTFT observed');
});
