/**
 * The gateway config the simulator's router runs with: one pool ("sim") listing the simulated endpoints,
 * its scoring/prefix/saturation/metrics taken from a user's config (first pool) or the defaults, with
 * overrides (the tuner's candidates) on top. Validated by the gateway's own schema.
 */
import { configSchema, type Config, type PoolConfig } from '../config/schema.js';
import { loadConfigFile } from '../config/load.js';

export const SIM_POOL = 'sim';
export const SIM_MODEL = 'sim-model';

/** The pool settings the simulator takes from a config (all optional). */
export interface PoolSettings {
  scoring?: Partial<PoolConfig['scoring']>;
  prefix?: Partial<PoolConfig['prefix']>;
  saturation?: Partial<{ queue_depth: number; kv_cache: number; retry_after: 'auto' | number | string }>;
  metrics?: Partial<{ path: string; interval: number | string; stale_after: number | string }>;
}

/** scoring/prefix/saturation/metrics of the first pool of a gateway config file. */
export function poolSettingsFromFile(path: string): PoolSettings {
  const cfg = loadConfigFile(path);
  const first = Object.keys(cfg.pools)[0];
  if (first === undefined) throw new Error(`${path}: no pools`);
  const p = cfg.pools[first];
  return { scoring: { ...p.scoring }, prefix: { ...p.prefix }, saturation: { ...p.saturation }, metrics: { ...p.metrics } };
}

/** Merge b over a, section by section. */
export function mergeSettings(a: PoolSettings, b: PoolSettings): PoolSettings {
  return {
    scoring: { ...a.scoring, ...b.scoring },
    prefix: { ...a.prefix, ...b.prefix },
    saturation: { ...a.saturation, ...b.saturation },
    metrics: { ...a.metrics, ...b.metrics },
  };
}

export function simConfig(endpoints: string[], models: string[], settings: PoolSettings = {}): Config {
  const names = [SIM_MODEL, ...models.filter((m) => m !== SIM_MODEL)];
  const raw = {
    auth: { mode: 'none', allow_unauthenticated: true },
    models: names.map((name) => ({ name, pool: SIM_POOL })),
    pools: {
      [SIM_POOL]: {
        endpoints,
        scoring: settings.scoring ?? {},
        prefix: settings.prefix ?? {},
        saturation: settings.saturation ?? {},
        metrics: settings.metrics ?? {},
      },
    },
  };
  const r = configSchema.safeParse(raw);
  if (!r.success) {
    throw new Error(`simulator config: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return r.data;
}
