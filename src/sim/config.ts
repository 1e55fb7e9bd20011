/**
 * What the simulator's router runs with: one pool ("sim") listing the simulated endpoints, its
 * scoring/prefix/saturation/metrics/max_num_seqs taken from a user's config (first pool) or routing's defaults, with
 * overrides (the tuner's candidates) on top; and how often the simulated endpoints are scraped.
 */
import { parseDuration } from '../common/units.js';
import { loadConfigFile } from '../config/load.js';
import { DEFAULT_METRICS_INTERVAL } from '../config/schema.js';
import { poolOptions, type Duration, type PoolOptions, type PoolOptionsInput, type RouterConfig } from '../routing/index.js';

export const SIM_POOL = 'sim';
export const SIM_MODEL = 'sim-model';

/** The pool settings the simulator takes from a config (all optional). */
export interface PoolSettings {
  scoring?: PoolOptionsInput['scoring'];
  prefix?: PoolOptionsInput['prefix'];
  saturation?: PoolOptionsInput['saturation'];
  metrics?: Partial<{ path: string; interval: Duration; stale_after: Duration }>;
  /** the engines' batch size as the pool is told it (not the simulated engines' own: see --max-num-seqs) */
  max_num_seqs?: number;
  /** the pool's wait queue (pools.<p>.queue), when the config turns it on: `simulate` models it unless told otherwise */
  queue?: { maxLength: number; maxWaitMs: number };
}

/** The simulated pool: the router's input, the pool's options in it, and the scrape interval (ms). */
export interface SimSetup {
  router: RouterConfig;
  pool: PoolOptions;
  scrapeIntervalMs: number;
}

/** scoring/prefix/saturation/metrics (and max_num_seqs and the wait queue, if set) of the first pool of a gateway config file. */
export function poolSettingsFromFile(path: string): PoolSettings {
  const cfg = loadConfigFile(path);
  const first = Object.keys(cfg.pools)[0];
  if (first === undefined) throw new Error(`${path}: no pools`);
  const p = cfg.pools[first];
  const { embeddings: _gatewayOnly, ...prefix } = p.prefix; // which requests the gateway matches: not the picker's
  const out: PoolSettings = { scoring: { ...p.scoring }, prefix, saturation: { ...p.saturation }, metrics: { ...p.metrics } };
  if (p.max_num_seqs !== undefined) out.max_num_seqs = p.max_num_seqs;
  if (p.queue.max_length > 0) out.queue = { maxLength: p.queue.max_length, maxWaitMs: p.queue.max_wait };
  return out;
}

/** Merge b over a, section by section. */
export function mergeSettings(a: PoolSettings, b: PoolSettings): PoolSettings {
  const out: PoolSettings = {
    scoring: { ...a.scoring, ...b.scoring },
    prefix: { ...a.prefix, ...b.prefix },
    saturation: { ...a.saturation, ...b.saturation },
    metrics: { ...a.metrics, ...b.metrics },
  };
  const seqs = b.max_num_seqs ?? a.max_num_seqs;
  if (seqs !== undefined) out.max_num_seqs = seqs;
  return out;
}

export function simConfig(endpoints: string[], models: string[], settings: PoolSettings = {}): SimSetup {
  const names = [SIM_MODEL, ...models.filter((m) => m !== SIM_MODEL)];
  let pool: PoolOptions;
  try {
    const staleAfter = settings.metrics?.stale_after;
    pool = poolOptions({
      endpoints,
      scoring: settings.scoring,
      prefix: settings.prefix,
      saturation: settings.saturation,
      metrics: staleAfter !== undefined ? { stale_after: staleAfter } : undefined,
      max_num_seqs: settings.max_num_seqs,
    });
  } catch (e) {
    throw new Error(`simulator config: ${(e as Error).message}`);
  }
  const interval = settings.metrics?.interval ?? DEFAULT_METRICS_INTERVAL;
  const scrapeIntervalMs = parseDuration(interval);
  if (scrapeIntervalMs === null) throw new Error(`simulator config: metrics.interval: not a duration: ${JSON.stringify(interval)}`);
  return {
    router: { models: names.map((name) => ({ name, pool: SIM_POOL })), pools: { [SIM_POOL]: pool } },
    pool,
    scrapeIntervalMs,
  };
}
