/**
 * A validated config mapped onto what the routing core and the scraper take. The routing core never sees
 * the config file's schema: this is the one place that knows both.
 */
import type { PoolOptions, RouterConfig } from '../routing/index.js';
import type { ScraperConfig } from '../signals/scraper.js';
import type { Config, PoolConfig } from './schema.js';

/** An endpoint as routing, metrics and logs name it: HOST:PORT, without the scheme it may be written with. */
export function endpointId(written: string): string {
  return written.replace(/^https?:\/\//, '');
}

/** Whether the pool speaks HTTPS to its endpoints: one written https://, or a CA file for them. */
export function poolUsesTls(pc: PoolConfig): boolean {
  return pc.tls_ca_file !== undefined || pc.endpoints.some((e) => e.startsWith('https://'));
}

/** The router's view of a config: per pool what the picker reads, and the model routes. */
export function routerConfig(cfg: Config): RouterConfig {
  const pools: Record<string, PoolOptions> = {};
  for (const [name, pc] of Object.entries(cfg.pools)) pools[name] = poolOptionsOf(pc);
  const models = cfg.models.map((m) => ({
    name: m.name,
    ...(m.pool !== undefined && { pool: m.pool }),
    ...(m.targets !== undefined && { targets: m.targets.map((t) => ({ model: t.model, weight: t.weight })) }),
  }));
  return { pools, models };
}

function poolOptionsOf(pc: PoolConfig): PoolOptions {
  const out: PoolOptions = {
    engine: pc.engine,
    endpoints: pc.endpoints.map(endpointId),
    discovery: pc.discovery !== undefined,
    policy: pc.policy,
    scoring: { ...pc.scoring },
    // (prefix.embeddings is the gateway's: which requests are matched at all, not how)
    prefix: { block_chars: pc.prefix.block_chars, max_blocks: pc.prefix.max_blocks, capacity_blocks_per_endpoint: pc.prefix.capacity_blocks_per_endpoint },
    saturation: { ...pc.saturation },
    metrics: { stale_after: pc.metrics.stale_after },
    max_ejection_percent: pc.max_ejection_percent,
  };
  if (pc.max_num_seqs !== undefined) out.max_num_seqs = pc.max_num_seqs;
  return out;
}

/**
 * The scraper's view of a config: per pool the engine, the metrics page and interval, the upstream key and
 * the CA certificates of an HTTPS pool (both read at start).
 */
export function scraperConfig(cfg: Config, keys: ReadonlyMap<string, string> = new Map(), cas: ReadonlyMap<string, string> = new Map()): ScraperConfig {
  const pools: ScraperConfig['pools'] = {};
  for (const [name, pc] of Object.entries(cfg.pools)) {
    pools[name] = { engine: pc.engine, metrics: { path: pc.metrics.path, interval: pc.metrics.interval }, api_key: keys.get(name) };
    if (poolUsesTls(pc)) pools[name].tls = { ca: cas.get(name) };
  }
  return { pools };
}
