// The image's HEALTHCHECK. Exit 0 when the server in this container answers its health route, else 1.
//   node healthcheck.mjs URL   probes URL (compose's mock service: http://127.0.0.1:8001/health)
//   node healthcheck.mjs       finds what the container runs from PID 1's command line:
//     `serve --config FILE`: GET /healthz on the admin listener that FILE configures (host and port
//       from the file, with the gateway's own defaults; 0.0.0.0/:: are probed on loopback);
//     `mock --port N`: GET /health on port N.
//   When PID 1 is not infergate (an init process), INFERGATE_CONFIG or /etc/infergate/gateway.yaml is
//   read as for serve.
import { readFileSync } from 'node:fs';

async function target() {
  if (process.argv[2]) return process.argv[2];
  let argv = [];
  try {
    argv = readFileSync('/proc/1/cmdline', 'utf8').split('\0');
  } catch {
    // not Linux, or /proc hidden: fall through to the config file
  }
  const opt = (name, short) => {
    const i = argv.findIndex((a) => a === name || (short && a === short));
    if (i >= 0) return argv[i + 1];
    const eq = argv.find((a) => a.startsWith(`${name}=`));
    return eq?.slice(name.length + 1);
  };
  const isCli = argv.some((a) => a.endsWith('/cli.js'));
  if (isCli && argv.includes('mock')) return `http://127.0.0.1:${opt('--port')}/health`;
  const file = (isCli && opt('--config', '-c')) || process.env.INFERGATE_CONFIG || '/etc/infergate/gateway.yaml';
  const { loadConfigFile } = await import(new URL('../dist/config/load.js', import.meta.url).href);
  const { host, port } = loadConfigFile(file).admin;
  const probe = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${probe}:${port}/healthz`;
}

try {
  const url = await target();
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  process.exit(0);
} catch (err) {
  process.stderr.write(`unhealthy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
