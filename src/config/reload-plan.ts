/**
 * What a config reload can apply to a running gateway, and what only a restart can. Pure: two validated
 * configs in, key paths out.
 *
 * The keys that need a restart are those the listeners were built with (addresses, the TLS file paths,
 * the limits the front enforces per connection and per body) and the quota store (its backend and
 * connection). A reload keeps their running values (so the applied config says what is in effect) and
 * names them, so a change there is reported, never silently ignored.
 */
import type { Config } from './schema.js';

/** Key paths whose change needs a restart (a path stands for everything under it). */
export const RESTART_ONLY: readonly (readonly string[])[] = [
  ['listen', 'host'],
  ['listen', 'port'],
  ['listen', 'tls'],
  ['admin', 'host'],
  ['admin', 'port'],
  ['limits', 'max_body_bytes'],
  ['limits', 'max_audio_body_bytes'],
  ['limits', 'max_buffered_body_bytes'],
  ['limits', 'max_header_bytes'],
  ['limits', 'max_connections'],
  ['limits', 'max_connections_per_client'],
  ['quota'],
  // the cluster connections are made once, at start
  ['cluster'],
  // the client front holds the CORS policy it was built with
  ['cors'],
  // the span exporter is made once, at start
  ['tracing'],
];

export interface ReloadPlan {
  /** the config to apply: `next` with the running values of the restart-only keys */
  config: Config;
  /** restart-only keys whose value differs (dotted paths), in RESTART_ONLY's order */
  needsRestart: string[];
  /** what changes live: top-level keys, and `pools.NAME` / `models.NAME` for pools and models (dotted) */
  changed: string[];
}

function get(obj: unknown, path: readonly string[]): unknown {
  let v = obj;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

function set(obj: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let o = obj;
  for (const k of path.slice(0, -1)) {
    if (o[k] === null || typeof o[k] !== 'object') o[k] = {};
    o = o[k] as Record<string, unknown>;
  }
  const last = path[path.length - 1];
  if (value === undefined) delete o[last];
  else o[last] = value;
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Compare the running config with a new one (both validated). `next` is not modified. */
export function planReload(running: Config, next: Config): ReloadPlan {
  const config = structuredClone(next);
  const needsRestart: string[] = [];
  for (const path of RESTART_ONLY) {
    const was = get(running, path);
    if (same(was, get(next, path))) continue;
    needsRestart.push(path.join('.'));
    set(config as unknown as Record<string, unknown>, path, structuredClone(was));
  }
  const changed: string[] = [];
  const keys = new Set([...Object.keys(running), ...Object.keys(config)]);
  for (const key of keys) {
    const a = (running as Record<string, unknown>)[key];
    const b = (config as Record<string, unknown>)[key];
    if (same(a, b)) continue;
    if (key === 'pools') {
      const names = new Set([...Object.keys(running.pools), ...Object.keys(config.pools)]);
      for (const n of names) if (!same(running.pools[n], config.pools[n])) changed.push(`pools.${n}`);
    } else if (key === 'models') {
      const byName = (c: Config) => new Map(c.models.map((m) => [m.name, m]));
      const ma = byName(running);
      const mb = byName(config);
      for (const n of new Set([...ma.keys(), ...mb.keys()])) if (!same(ma.get(n), mb.get(n))) changed.push(`models.${n}`);
      if (changed.every((c) => !c.startsWith('models.'))) changed.push('models'); // only the order changed
    } else {
      changed.push(key);
    }
  }
  return { config, needsRestart, changed };
}
