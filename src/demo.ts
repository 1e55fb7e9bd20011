/**
 * `infergate demo` (what `npm start` runs): four simulated vLLM servers and a gateway in front of them,
 * in one process, with config/demo.yaml (JWT on, trusting the dev key, which is made on first use).
 * Prints a curl command to paste, with a token.
 */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadConfigOrReport } from './config/load.js';
import { exitDespiteIdleConnections } from './common/listen.js';

export async function demoMain(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      config: { type: 'string', short: 'c' },
      port: { type: 'string' },
      'admin-port': { type: 'string' },
      'mock-port': { type: 'string' },
      'time-scale': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      'Usage: infergate demo [--config FILE] [--port N] [--admin-port N] [--mock-port N] [--time-scale X]\n\n' +
        'Starts one simulated vLLM server per endpoint of the config\'s first pool (default config/demo.yaml:\n' +
        '4 servers on 127.0.0.1:8001-8004) and the gateway in front of them. Ctrl-C stops everything.\n' +
        'With auth.mode jwt (the default config) it makes the dev key pair in config/dev-keys/ if there is\n' +
        'none and prints a curl command with a token signed by it (see "infergate token --help").\n' +
        '  --port N        the gateway\'s client port (default from the config: 8080)\n' +
        '  --admin-port N  the admin port (default from the config: 9090)\n' +
        '  --mock-port N   the first mock server\'s port; the others follow (default from the config: 8001)\n' +
        '  --time-scale X  mock servers run X times faster than real time (default 1)\n',
    );
    return 0;
  }
  const file = values.config ?? fileURLToPath(new URL('../config/demo.yaml', import.meta.url));
  if (values.config === undefined) {
    // config/demo.yaml names the dev key set, made on first use: made before the config's files are checked
    const { ensureDevKey } = await import('./auth/dev-keys.js');
    await ensureDevKey();
  }
  const config = loadConfigOrReport(file);
  if (!config) return 1;
  const portOf = (flag: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`--${flag} must be a port number, not "${v}"`);
    return n;
  };
  const [poolName, pool] = Object.entries(config.pools)[0];
  try {
    config.listen.port = portOf('port', values.port) ?? config.listen.port;
    config.admin.port = portOf('admin-port', values['admin-port']) ?? config.admin.port;
    const mockPort = portOf('mock-port', values['mock-port']);
    if (mockPort !== undefined) {
      pool.endpoints = pool.endpoints.map((e, i) => `${e.slice(0, e.lastIndexOf(':'))}:${mockPort + i}`);
    }
  } catch (err) {
    process.stderr.write(`infergate demo: ${(err as Error).message}\n`);
    return 2;
  }
  const baseModel = config.models.find((m) => m.pool === poolName)?.name ?? 'model';
  const adapters = config.models.filter((m) => m.pool === poolName && m.name !== baseModel).map((m) => m.name);
  const ports = pool.endpoints.map((e) => Number(e.slice(e.lastIndexOf(':') + 1)));
  const contiguous = ports.every((p, i) => p === ports[0] + i);
  if (!contiguous) {
    process.stderr.write('infergate demo: the first pool\'s endpoints must be consecutive ports on one host\n');
    return 1;
  }

  let token: string | undefined;
  const jwt = config.auth.mode === 'jwt' ? config.auth.jwt : undefined;
  if (jwt) {
    // before the gateway reads the key set (config/demo.yaml's jwks_file is the dev key's)
    const { ensureDevKey, mintToken } = await import('./auth/dev-keys.js');
    const key = await ensureDevKey();
    const extra: Record<string, unknown> = { [jwt.models_claim]: ['*'] };
    if (jwt.tenant_claim !== 'sub') extra[jwt.tenant_claim] = 'demo';
    token = await mintToken(key, { sub: 'demo', issuer: jwt.issuer, audience: jwt.audience, ttl: 24 * 3600, extra });
  }

  const { loadUws } = await import('./common/uws.js');
  loadUws(config.limits.max_header_bytes); // before the mock loads uWS with its defaults
  const { startMockServers } = await import('./mock/index.js');
  const mocks = await startMockServers({
    port: ports[0],
    count: ports.length,
    host: pool.endpoints[0].slice(0, pool.endpoints[0].lastIndexOf(':')).replace(/^\[(.*)\]$/, '$1'), // [::1] → ::1
    model: baseModel,
    loras: adapters,
    timeScale: values['time-scale'] ? Number(values['time-scale']) : 1,
  });
  for (const e of mocks.endpoints) process.stdout.write(`mock vLLM server on http://${e}\n`);

  const { createLogger, effectiveLevel } = await import('./observability/logger.js');
  const { Gateway } = await import('./gateway/server.js');
  let logger;
  try {
    logger = createLogger(effectiveLevel(config.logging.level), config.logging.format);
  } catch (err) {
    process.stderr.write(`infergate demo: ${(err as Error).message}\n`);
    await mocks.close();
    return 1;
  }
  const gateway = new Gateway(config, logger);
  let addrs;
  try {
    addrs = await gateway.start();
  } catch (err) {
    process.stderr.write(`infergate demo: ${(err as Error).message}\n`);
    await mocks.close();
    return 1;
  }
  const body = JSON.stringify({
    model: baseModel,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 32,
    messages: [
      {
        role: 'system',
        content:
          'You are the support assistant of a company that runs many replicas of a language model behind one endpoint. ' +
          'Answer briefly and politely, and say so when you do not know. This long system prompt is shared by every ' +
          'conversation, which is what prefix-aware routing exploits.',
      },
      { role: 'user', content: 'Say hello.' },
    ],
  });
  process.stdout.write(
    `listening on ${addrs.url}\nadmin listening on ${addrs.adminUrl}\n\n` +
      `Try it (run it twice: the second answer comes from the same pod, whose cache holds the prompt):\n\n` +
      `  curl -sN -D - ${addrs.url}/v1/chat/completions -H 'content-type: application/json' \\\n` +
      (token ? `    -H 'authorization: Bearer ${token}' \\\n` : '') +
      `    -d '${body}'\n\n` +
      `Then: curl -s ${addrs.adminUrl}/debug/decisions?n=2   and   curl -s ${addrs.adminUrl}/metrics\n` +
      `The live status page: open ${addrs.adminUrl}/ in a browser.\n` +
      (token
        ? `The token (tenant "demo", every model, 24 h) is signed by the dev key in config/dev-keys/; mint others with\n` +
          `  infergate token --sub alice --models 'support-bot-lora' --ttl 15m\n`
        : `Auth is off in this config (auth.mode: none).\n`) +
      `Ctrl-C stops it.\n\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await gateway.stop(2000);
  await mocks.close();
  exitDespiteIdleConnections(0);
  return 0;
}
