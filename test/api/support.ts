/**
 * What the API tests share: real `infergate mock` servers serving a model whose name has a slash (and a
 * LoRA adapter), a real gateway with JWT auth on (the demo's issuer and dev key set), and tokens minted by
 * `infergate token` as a user would.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { runCli, startGateway, gatewayConfig, ROOT, type RunningGateway } from '../helpers/process.js';
import { startMocks, type Mocks } from '../e2e/support.js';

export const MODEL = 'org/test-model';
export const ADAPTER = 'org/adapter-a';

/** `infergate token ARGS`: the JWT it prints. */
export async function mint(args: string[]): Promise<string> {
  const p = runCli(['token', ...args]);
  const code = await p.exited(20_000);
  if (code !== 0) throw new Error(`infergate token failed (${code}): ${p.stderr()}`);
  return p.stdout().trim();
}

/** The demo's auth section, its key set named where it is (the path in the file is relative to it). */
export function demoAuth(): Record<string, unknown> {
  const auth = (parse(readFileSync(join(ROOT, 'config', 'demo.yaml'), 'utf8')) as { auth: { jwt: Record<string, unknown> } }).auth;
  auth.jwt.jwks_file = join(ROOT, 'config', 'dev-keys', 'jwks.json');
  return auth;
}

export interface ApiSetup {
  mocks: Mocks;
  gw: RunningGateway;
  /** a token for every model here */
  token: string;
  /** a token for other models only */
  otherToken: string;
  stop(): Promise<void>;
}

/**
 * Two mock servers (the model and its adapter), a gateway with auth on: pool `p` serves MODEL (and the
 * alias `alias`), pool `q` the adapter, on the same servers; `over` replaces top-level config keys,
 * `qPool` the second pool's.
 */
export async function startApi(over: Record<string, unknown> = {}, qPool: Record<string, unknown> = {}): Promise<ApiSetup> {
  // minted first: it makes the dev key pair if there is none yet
  const token = await mint(['--sub', 'alice', '--models', 'org/*,alias', '--ttl', '10m']);
  const otherToken = await mint(['--sub', 'bob', '--models', 'other-*', '--ttl', '10m']);
  const mocks = await startMocks(2, ['--model', MODEL, '--lora', ADAPTER, '--time-scale', '20', '--seed', '11']);
  let gw: RunningGateway;
  try {
    const cfg = gatewayConfig(mocks.endpoints, {
      over: {
        auth: demoAuth(),
        models: [
          { name: MODEL, pool: 'p' },
          { name: ADAPTER, pool: 'q' },
          { name: 'alias', targets: [{ model: MODEL, weight: 1 }] },
        ],
        ...over,
      },
    });
    (cfg.pools as Record<string, unknown>).q = { endpoints: mocks.endpoints, policy: 'scored', metrics: { interval: '100ms', stale_after: '1s' }, ...qPool };
    gw = await startGateway(cfg);
  } catch (e) {
    await mocks.kill();
    throw e;
  }
  return {
    mocks,
    gw,
    token,
    otherToken,
    async stop() {
      await gw.stop();
      await mocks.kill();
    },
  };
}
