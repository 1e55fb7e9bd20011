/** Starting infergate (the compiled `serve` command inside dist-bench) with a config written to a temp dir. */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { INFERGATE_CLI, freePort, startProcess, type Proc } from './common.js';

export interface GatewayOptions {
  dir: string;
  model: string;
  /** more model names served by the same pool (LoRA adapters) */
  extraModels?: string[];
  endpoints: string[];
  policy: string;
  debugHeaders?: boolean;
  /** Extra pool keys (e.g. metrics interval). */
  pool?: Record<string, unknown>;
  nodeArgs?: string[];
  /** `serve --workers N` (default 1: one process) */
  workers?: number;
  /** the config's auth section (default: mode none) */
  auth?: Record<string, unknown>;
}

export interface Gateway { url: string; port: number; adminPort: number; configFile: string; proc: Proc }

export function gatewayAvailable(): boolean {
  return existsSync(INFERGATE_CLI);
}

export function gatewayConfig(o: GatewayOptions, port: number, adminPort: number): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port },
    admin: { host: '127.0.0.1', port: adminPort },
    debug_headers: o.debugHeaders ?? false,
    auth: o.auth ?? { mode: 'none', allow_unauthenticated: true },
    models: [o.model, ...(o.extraModels ?? [])].map((name) => ({ name, pool: 'bench' })),
    pools: { bench: { engine: 'vllm', endpoints: o.endpoints, policy: o.policy, ...(o.pool ?? {}) } },
  };
}

export async function startGateway(o: GatewayOptions): Promise<Gateway> {
  if (!gatewayAvailable()) throw new Error(`infergate CLI not built at ${INFERGATE_CLI} (is src/cli.ts there yet?)`);
  const port = await freePort();
  let adminPort = await freePort();
  while (adminPort === port) adminPort = await freePort();
  const configFile = path.join(o.dir, `gateway-${o.policy}-${port}.yaml`);
  // (a relative key path in `auth` is read from this directory)
  // JSON is valid YAML: written as JSON so no YAML writer is needed.
  writeFileSync(configFile, JSON.stringify(gatewayConfig(o, port, adminPort), null, 2) + '\n');
  const proc = await startProcess(process.execPath, [...(o.nodeArgs ?? []), INFERGATE_CLI, 'serve', '--config', configFile, ...(o.workers && o.workers > 1 ? ['--workers', String(o.workers)] : [])], {
    readyPattern: /^listening on https?:\/\/\S+/,
    timeoutMs: 30000,
    name: 'infergate serve',
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
  });
  const m = /listening on (https?:\/\/\S+)/.exec(proc.ready[0]);
  let url = m ? m[1] : `http://127.0.0.1:${port}`;
  url = url.replace('0.0.0.0', '127.0.0.1').replace(/\/$/, '');
  return { url, port, adminPort, configFile, proc };
}
