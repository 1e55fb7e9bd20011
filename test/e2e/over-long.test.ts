// A prompt longer than the servers take, sent while the pool is saturated: the gateway knows the servers'
// max_model_len (from their /v1/models), so it sends the request on and the client gets the server's own
// 400 ("maximum context length"), at once, rather than a 429 whose Retry-After would only bring the same
// request back. A prompt that fits still gets the 429 then.
import t from 'tap';
import { request } from 'undici';
import { startMocks, startGateway, gatewayConfig, chat } from './support.js';
import { until } from '../helpers/process.js';

const MAX = 4096;
// one sequence at a time, at real-time speed
const mocks = await startMocks(2, ['--model', 'test-model', '--time-scale', '1', '--max-num-seqs', '1', '--max-model-len', String(MAX), '--seed', '7']);
const gw = await startGateway(
  gatewayConfig(mocks.endpoints, { pool: { policy: 'scored', max_num_seqs: 1, saturation: { queue_depth: 2, kv_cache: 0.8, retry_after: 'auto' } } }),
);
t.teardown(async () => {
  await gw.stop();
  await mocks.kill();
});

const tooLong = 'word '.repeat(MAX + 1000); // ~5,000 tokens by every estimate here (4 characters a token)

t.test('saturated: an over-long prompt gets the server\'s 400, one that fits a 429', async (t) => {
  // the gateway has read the servers' max_model_len
  await until(async () => {
    const r = await request(`${gw.url}/v1/models`);
    return ((await r.body.json()) as { data: Array<{ max_model_len?: number }> }).data[0]?.max_model_len === MAX;
  }, 20_000, 'max_model_len in the model list');

  // Long streamed answers (2,000 tokens at real-time speed) whose bodies are left unread until the end:
  // whatever the gateway admits holds its place through the checks, so the pool, once saturated, stays so
  // (a request that ended would free a place for the next arrival).
  const stop = new AbortController();
  const opened: Array<Promise<unknown>> = [];
  const open = async (content: string): Promise<number> => {
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', stream: true, max_tokens: 2000, messages: [{ role: 'user', content }] }),
      signal: stop.signal,
    });
    opened.push(r.text().catch(() => undefined));
    return r.status;
  };
  const openAll: Array<Promise<number>> = [];
  const tracked = (content: string) => {
    const p = open(content).catch(() => 0);
    openAll.push(p);
    return p;
  };
  // a request the servers queue gets its answer's head only when it starts running: its status is
  // 'pending' until then (a 429 comes at once)
  const within = (p: Promise<number>, ms: number) => Promise.race([p, new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);
  for (let i = 0; i < 8; i++) void tracked(`busy request ${i}`);
  // Saturation here rests on evidence that moves with every scrape and first byte, so the check is a
  // bracket: a request that fits refused just before and just after the over-long one (else, while the
  // probes admitted add to the load, once more).
  const overStatuses: number[] = [];
  let over: Awaited<ReturnType<typeof chat>> | undefined;
  await until(async () => {
    if ((await within(tracked('probe before'), 500)) !== 429) return false;
    over = await chat(gw.url, { model: 'test-model', max_tokens: 16, messages: [{ role: 'user', content: tooLong }] });
    overStatuses.push(over.status);
    if (over.status !== 400) return true; // wrong: reported below
    return (await within(tracked('probe after'), 5_000)) === 429;
  }, 30_000, 'an over-long request between two refusals of requests that fit');
  t.same([...new Set(overStatuses)], [400], `the over-long request: the server's 400 every time, never a 429 (${overStatuses.length} sent)`);
  t.match(over!.body, /maximum context length is 4096 tokens/, 'in the server\'s words');
  t.equal(over!.headers.get('retry-after'), null, 'no Retry-After: nothing to retry');

  // the clients leave: their requests are cancelled upstream
  stop.abort();
  await Promise.all(openAll);
  await Promise.all(opened);
  await until(async () => {
    const pools = (await (await request(`${gw.adminUrl}/debug/pools`)).body.json()) as Record<string, { endpoints: Array<{ in_flight: number }> }>;
    return Object.values(pools).every((p) => p.endpoints.every((e) => e.in_flight === 0));
  }, 20_000, 'nothing left in flight');
});
