import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Scraper } from '../../src/signals/scraper.js';
import { configSchema } from '../../src/config/schema.js';
import { scraperConfig } from '../../src/config/routing.js';
import type { EndpointSignals } from '../../src/routing/types.js';

const GOOD = 'vllm:num_requests_waiting{model_name="m"} 2\nvllm:num_requests_running{model_name="m"} 5\nvllm:kv_cache_usage_perc{model_name="m"} 0.25\n';

function serve(handler: http.RequestListener): Promise<{ server: http.Server; addr: string }> {
  return new Promise((resolve) => {
    const server = http.createServer(handler);
    server.listen(0, '127.0.0.1', () => resolve({ server, addr: `127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
}

t.test('scrapes good, hung and broken endpoints without crashing', async (t) => {
  const good = await serve((req, res) => {
    if (req.url === '/v1/models') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ data: [{ id: 'm', parent: null, max_model_len: 32768 }, { id: 'lora-a', parent: 'm' }] }));
      return;
    }
    res.end(GOOD);
  });
  const hung = await serve(() => {
    /* never answers */
  });
  const broken = await serve((_req, res) => {
    res.statusCode = 500;
    res.end('oops');
  });
  const sockets = new Set<import('node:net').Socket>();
  hung.server.on('connection', (s) => sockets.add(s));
  // a port with nothing listening
  const closed = await serve(() => undefined);
  const deadAddr = closed.addr;
  await new Promise<void>((r) => closed.server.close(() => r()));

  const eps = [good.addr, hung.addr, broken.addr, deadAddr];
  const cfg = configSchema.parse({
    auth: { mode: 'none', allow_unauthenticated: true },
    models: [{ name: 'm', pool: 'p' }],
    pools: { p: { endpoints: eps, metrics: { interval: '500ms', stale_after: '2s' } } }, // a 400 ms scrape timeout: a loaded machine still answers in time
  });
  const updates = new Map<string, EndpointSignals[]>();
  const fails = new Map<string, number>();
  const router = {
    pools: () => ['p'],
    endpoints: () => eps,
    updateSignals: (ep: string, s: EndpointSignals) => {
      const l = updates.get(ep) ?? [];
      l.push(s);
      updates.set(ep, l);
    },
    signalsFailed: (ep: string) => fails.set(ep, (fails.get(ep) ?? 0) + 1),
  };
  const warnings: unknown[] = [];
  const scraper = new Scraper(router, scraperConfig(cfg), { warn: (o) => warnings.push(o) });
  scraper.start();
  // scrape until each endpoint has shown its behaviour a few times (a count, with a deadline: how long that
  // takes depends on the machine's load)
  const deadline = Date.now() + 20_000;
  while (
    Date.now() < deadline &&
    !((updates.get(good.addr)?.length ?? 0) >= 4 && [hung.addr, broken.addr, deadAddr].every((a) => (fails.get(a) ?? 0) >= 2))
  ) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await scraper.stop();
  for (const s of sockets) s.destroy();
  await Promise.all([good, hung, broken].map((x) => new Promise<void>((r) => x.server.close(() => r()))));

  const g = updates.get(good.addr) ?? [];
  t.ok(g.length >= 4, `good endpoint scraped repeatedly (${g.length})`);
  t.same([g[0].waiting, g[0].running, g[0].kvUsage], [2, 5, 0.25]);
  t.same(g[0].adapters, ['lora-a']);
  t.equal(g[0].maxModelLen, 32768, 'the base model\'s max_model_len');
  t.notOk(fails.has(good.addr));
  t.ok((fails.get(hung.addr) ?? 0) >= 2, `hung endpoint times out (${fails.get(hung.addr)})`);
  t.ok((fails.get(broken.addr) ?? 0) >= 2, 'HTTP 500 counts as failure');
  t.ok((fails.get(deadAddr) ?? 0) >= 2, 'connection refused counts as failure');
  t.equal(warnings.length, 3, 'one warning per failing endpoint, not one per scrape');
});
