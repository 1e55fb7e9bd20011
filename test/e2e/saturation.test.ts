// Saturation: servers that run one sequence at a time (and the pool says so: max_num_seqs 1), and far more
// concurrent long requests than they can queue. The excess is answered at once with 429, Retry-After and an
// OpenAI error body, and counted; everything admitted completes. (Without a known batch capacity a
// simultaneous burst carries no evidence of a queue until a scrape or a late first byte shows one: see
// burst-admission.test.ts.)
import t from 'tap';
import { startMocks, startGateway, gatewayConfig, chat, countBy, scrape, metric } from './support.js';

const mocks = await startMocks(2, ['--model', 'test-model', '--time-scale', '10', '--max-num-seqs', '1', '--seed', '5']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } } }),
);
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

t.test('40 concurrent long requests against two one-sequence servers', async (t) => {
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      chat(gw.url, { model: 'test-model', stream: true, max_tokens: 64, messages: [{ role: 'user', content: `long request ${i}: write an essay` }] }),
    ),
  );
  const statuses = countBy(results.map((r) => r.status));
  t.comment(`statuses ${JSON.stringify([...statuses])}`);
  t.same([...statuses.keys()].sort(), [200, 429], 'only 200 and 429 answers');
  const rejected = results.filter((r) => r.status === 429);
  const ok = results.filter((r) => r.status === 200);
  t.ok(rejected.length >= 10, `${rejected.length} were rejected`);
  t.ok(ok.length >= 2, `${ok.length} were admitted`);
  t.equal(ok.filter((r) => r.complete).length, ok.length, 'every admitted stream completed with [DONE]');

  for (const r of rejected) {
    const ra = r.headers.get('retry-after');
    if (!(ra !== null && /^\d+$/.test(ra) && Number(ra) >= 1 && Number(ra) <= 60)) {
      t.fail(`retry-after ${JSON.stringify(ra)} is not integer seconds 1-60`);
      break;
    }
    const body = JSON.parse(r.body) as { error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } };
    if (!(body.error && typeof body.error.message === 'string' && typeof body.error.type === 'string' && 'param' in body.error && body.error.code === 'pool_saturated')) {
      t.fail(`not an OpenAI error body with code pool_saturated: ${r.body}`);
      break;
    }
    if (!r.headers.get('content-type')?.startsWith('application/json')) {
      t.fail(`429 content-type ${r.headers.get('content-type')}`);
      break;
    }
    if (r.body.includes('127.0.0.1')) {
      t.fail(`the error names a backend address: ${r.body}`);
      break;
    }
  }
  t.pass(`all ${rejected.length} rejections carry Retry-After (${[...countBy(rejected.map((r) => r.headers.get('retry-after')))].map(([k, v]) => `${k}s×${v}`).join(', ')}) and an OpenAI error body`);

  const m = await scrape(gw.adminUrl);
  t.equal(metric(m, 'infergate_rejected_total', { reason: 'saturated' }), rejected.length, 'infergate_rejected_total{reason="saturated"} counts each 429');
  t.equal(metric(m, 'infergate_requests_total', { code: '429' }), rejected.length, 'infergate_requests_total{code="429"} too');
  t.equal(metric(m, 'infergate_requests_total', { code: '200' }), ok.length, 'and the 200s');
  let served = 0;
  for (const ep of mocks.endpoints) served += metric(await scrape(`http://${ep}`), 'vllm:request_success_total');
  t.equal(served, ok.length, 'the servers finished exactly the admitted requests: a 429 never reached them');

  // a client that honours Retry-After (waits that long, once) gets through
  await new Promise((r) => setTimeout(r, Number(rejected[0].headers.get('retry-after')) * 1000));
  const retry = await chat(gw.url, { model: 'test-model', stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'retried request' }] });
  t.equal(retry.status, 200, 'a retry after Retry-After seconds is admitted');
  t.ok(retry.complete, 'and completes');
});
