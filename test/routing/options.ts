// Routing's own options and the config file's: the file's defaults must map onto exactly routing's defaults,
// so that a pool built from a config and one built by fromPool (simulator, benchmarks) never drift apart.
import t from 'tap';
import { configSchema } from '../../src/config/schema.js';
import { routerConfig, scraperConfig } from '../../src/config/routing.js';
import { DEFAULT_POOL_OPTIONS, POLICY_NAMES, SCORER_NAMES, poolOptions } from '../../src/routing/index.js';

const parse = (pools: Record<string, unknown>, models: unknown[] = [{ name: 'm', pool: 'p' }]) =>
  configSchema.parse({ auth: { mode: 'none', allow_unauthenticated: true }, models, pools });

t.test("the schema's defaults are routing's defaults", async (t) => {
  const cfg = parse({ p: { endpoints: ['127.0.0.1:1'] } });
  t.strictSame(routerConfig(cfg).pools.p, poolOptions({ endpoints: ['127.0.0.1:1'] }));
  t.strictSame(poolOptions({ endpoints: ['127.0.0.1:1'] }), { ...DEFAULT_POOL_OPTIONS, endpoints: ['127.0.0.1:1'] });
});

t.test("the schema's scoring keys and policies come from routing's registries", async (t) => {
  const cfg = parse({ p: { endpoints: ['127.0.0.1:1'] } });
  t.strictSame(Object.keys(cfg.pools.p.scoring).sort(), [...SCORER_NAMES].sort());
  for (const policy of POLICY_NAMES) t.equal(parse({ p: { endpoints: ['127.0.0.1:1'], policy } }).pools.p.policy, policy);
  t.throws(() => parse({ p: { endpoints: ['127.0.0.1:1'], policy: 'best' } }));
  t.throws(() => parse({ p: { endpoints: ['127.0.0.1:1'], scoring: { nope: 1 } } }));
});

t.test('routerConfig maps every pool key the picker reads, and the routes', async (t) => {
  const cfg = parse(
    {
      p: {
        engine: 'sglang',
        endpoints: ['127.0.0.1:1'],
        policy: 'least_request',
        max_num_seqs: 64,
        scoring: { prefix: 5, load: 0 },
        prefix: { block_chars: 32, max_blocks: 99, capacity_blocks_per_endpoint: 7 },
        saturation: { queue_depth: 3, kv_cache: 0.5, retry_after: '2s', max_prefill_backlog: '800ms' },
        metrics: { stale_after: '250ms', interval: '50ms', path: '/m' },
        max_ejection_percent: 25,
      },
      d: { discovery: { dns: 'pods.local', port: 8000 } },
    },
    [
      { name: 'a', pool: 'p' },
      { name: 'b', pool: 'd' },
      { name: 'ab', targets: [{ model: 'a', weight: 3 }, { model: 'b', weight: 1 }] },
    ],
  );
  const r = routerConfig(cfg);
  t.strictSame(r.pools.p, {
    engine: 'sglang',
    endpoints: ['127.0.0.1:1'],
    discovery: false,
    policy: 'least_request',
    scoring: { ...DEFAULT_POOL_OPTIONS.scoring, prefix: 5, load: 0 },
    prefix: { block_chars: 32, max_blocks: 99, capacity_blocks_per_endpoint: 7 },
    saturation: { queue_depth: 3, kv_cache: 0.5, retry_after: 2000, max_prefill_backlog: 800 },
    metrics: { stale_after: 250 },
    max_ejection_percent: 25,
    max_num_seqs: 64,
  });
  t.equal(r.pools.d.discovery, true);
  t.strictSame(r.pools.d.endpoints, []);
  t.strictSame(r.models, [
    { name: 'a', pool: 'p' },
    { name: 'b', pool: 'd' },
    { name: 'ab', targets: [{ model: 'a', weight: 3 }, { model: 'b', weight: 1 }] },
  ]);
  const s = scraperConfig(cfg);
  t.strictSame(s.pools.p, { engine: 'sglang', metrics: { path: '/m', interval: 50 }, api_key: undefined });
  t.strictSame(s.pools.d.metrics, { path: '/metrics', interval: 100 });
});

t.test('poolOptions: partial keys over the defaults, durations as ms or strings, bad input refused', async (t) => {
  const o = poolOptions({ saturation: { retry_after: '7s' }, metrics: { stale_after: '1s' }, scoring: { lora: 0 } });
  t.equal(o.saturation.retry_after, 7000);
  t.equal(o.saturation.queue_depth, DEFAULT_POOL_OPTIONS.saturation.queue_depth);
  t.equal(o.metrics.stale_after, 1000);
  t.equal(o.scoring.lora, 0);
  t.equal(o.scoring.prefix, DEFAULT_POOL_OPTIONS.scoring.prefix);
  t.equal(poolOptions({ saturation: { retry_after: 1500 } }).saturation.retry_after, 1500);
  o.scoring.prefix = 99;
  o.prefix.block_chars = 1;
  t.not(DEFAULT_POOL_OPTIONS.scoring.prefix, 99, 'the defaults are not shared with what poolOptions returns');
  t.not(DEFAULT_POOL_OPTIONS.prefix.block_chars, 1);
  t.throws(() => poolOptions({ policy: 'best' as never }), /unknown policy/);
  t.throws(() => poolOptions({ scoring: { nope: 1 } as never }), /unknown scorer/);
  t.throws(() => poolOptions({ metrics: { stale_after: 'soon' } }), /not a duration/);
});
