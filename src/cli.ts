#!/usr/bin/env node
/**
 * The one entry point: `infergate <command> [options]`. Each command's module is loaded only when used,
 * so `check-config` never loads uWS and `mock` never loads the gateway.
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { infergateVersion } from './common/version.js';

const HELP = `infergate — an L7 gateway for LLM model servers that routes on prefix affinity and live load

Usage: infergate <command> [options]

Commands:
  serve --config FILE        run the gateway (-c FILE); prints "listening on URL" when ready;
                             --workers N|auto runs N gateway processes on the one port
  check-config FILE          validate a config file: "ok" and exit 0, or each problem with its line and exit 1
  schema                     print the config file's JSON Schema
  mock --port N --model NAME run simulated vLLM servers (see "infergate mock --help")
  demo                       start 4 mock servers and a gateway in front of them (JWT on), and print a
                             curl to try, with a token
  token --sub S              mint a development JWT for the demo's config or --config FILE
                             (see "infergate token --help")
  simulate --trace FILE      replay traffic in virtual time against simulated servers, per policy
                             (see "infergate simulate --help")
  version                    print the version

Environment: LOG_LEVEL (fatal|error|warn|info|debug|trace|silent) wins over the config's logging.level
(serve, demo); without either the level is info; an unknown LOG_LEVEL exits 1. Logs are JSON lines, or
pino-pretty's on a terminal when it is installed (logging.format: auto|json|pretty).
`;

const SERVE_HELP = `Usage: infergate serve --config FILE [--workers N|auto]

Runs the gateway described by FILE (YAML; see config/ for examples, "infergate schema" for every key).
Prints "listening on http(s)://HOST:PORT" and "admin listening on http://HOST:PORT" when ready.
A bad config exits 1 before listening, naming each problem with its key path and line.
Client port: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /tokenize,
/detokenize, /v1/rerank (and /rerank, /v2/rerank), /v1/score (and /score), /classify, /pooling (each
routed by its "model"), /v1/audio/transcriptions, /v1/audio/translations (a multipart form routed by its
"model" field; bodies up to limits.max_audio_body_bytes), GET /health (liveness, no token), GET
/v1/models, /v1/models/{id} (with the servers' max_model_len once they have reported it); GET
/v1/responses/{id} and POST /v1/responses/{id}/cancel (sent to the server that stored
that answer, known from response_affinity: an id the gateway did not relay is 404); a wrong method on a
known path is 405 with Allow; cors.origins turns on CORS (preflights answered by the gateway).
Admin port: GET / (a live status page), /metrics, /healthz, /readyz (admin.ready_when), /debug/pools,
/debug/state, /debug/decisions?n=N (the last admin.decisions routing decisions).
SIGTERM/SIGINT: stop accepting, let in-flight requests finish (limits.drain_timeout), cut what is left
with the error code shutting_down, exit 0. The admin port answers until the exit (/readyz: 503 draining).
SIGHUP, or a change of FILE (admin.watch_config, on by default): reload FILE. Requests in flight finish
on the config they started with; a file with a problem changes nothing (each problem is logged with its
line). Listener addresses, TLS paths, the body/header/connection limits and the quota store need a
restart: a change there is logged "needs restart" and the rest is applied. Counted in
infergate_config_reloads_total{result="success"|"needs_restart"|"error"}.
SIGHUP (or a change of the files, unless listen.tls.watch is false): reload listen.tls.cert and key; new
connections get the new pair, open ones finish on the old; a pair that cannot be used changes nothing.
LOG_LEVEL, when set, wins over the config's logging.level, at start and on reload (an unknown one exits 1).
One access line per client request (logging.access_log); tracing.otlp_endpoint exports one span per
request (OTLP/HTTP).
Open files: each proxied request holds two descriptors (client and upstream); limits.max_connections
defaults to half of what the open-file limit leaves (raise it with ulimit -n / LimitNOFILE= / docker
--ulimit nofile=; Node lifts the soft limit to the hard one itself). At the limit the client port stops
accepting until descriptors are free; the admin port keeps answering.
--workers N (default 1): N processes serve the client port, each a whole gateway (auto: one per CPU).
The port is checked first: one any other process holds fails the start; the workers then share it
(SO_REUSEPORT, only among themselves). Without a cluster backend they share learned prefix picks over
IPC through this parent process; with cluster.backend redis, through Redis. The admin port is the
parent's: /metrics summed over the workers (plus infergate_workers, infergate_worker_restarts_total),
/healthz and /readyz from the workers' states, /debug/workers; the status page and other /debug/* paths
are one worker's (?worker=K; default the first serving). SIGTERM/SIGINT drain every worker; SIGHUP
reloads every worker; a worker that dies is restarted with a backoff; a start that fails exits 1.
With auth.mode jwt, clients send "Authorization: Bearer <JWT>" (the keys are read, and a jwks_url fetched,
before listening; "infergate token" mints development tokens for config/demo.yaml's dev key).
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return command === undefined ? 1 : 0;
    case 'version':
    case '--version':
      if (rest.includes('--help') || rest.includes('-h')) {
        process.stdout.write('Usage: infergate version\n\nPrints the version of infergate.\n');
        return 0;
      }
      process.stdout.write(`${version()}\n`);
      return 0;
    case 'serve':
      return serve(rest);
    case 'check-config':
      return checkConfig(rest);
    case 'schema': {
      if (rest.includes('--help') || rest.includes('-h')) {
        process.stdout.write(
          'Usage: infergate schema\n\nPrints the JSON Schema (draft 2020-12) of the config file on stdout: every key with its type,\n' +
            'description and default; durations and sizes with their patterns. config/gateway.schema.json is this\n' +
            'output; editors with yaml-language-server read it through the first line of config/*.yaml:\n' +
            '  # yaml-language-server: $schema=gateway.schema.json\n',
        );
        return 0;
      }
      if (rest.length > 0) {
        process.stderr.write(`infergate schema: takes no arguments (got ${rest.join(' ')})\n`);
        return 2;
      }
      const { configJsonSchema } = await import('./config/schema.js');
      process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
      return 0;
    }
    case 'mock': {
      const { mockMain } = await import('./mock/index.js');
      return mockMain(rest);
    }
    case 'token': {
      const { tokenMain } = await import('./auth/token-command.js');
      return tokenMain(rest);
    }
    case 'demo': {
      const { demoMain } = await import('./demo.js');
      return demoMain(rest);
    }
    case 'simulate': {
      const { simulateMain } = await import('./sim/index.js');
      return simulateMain(rest);
    }
    default:
      process.stderr.write(`infergate: unknown command "${command}"\n\n${HELP}`);
      return 2;
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { config: { type: 'string', short: 'c' }, workers: { type: 'string', short: 'w' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  const { parseWorkers, workerRoleFromEnv } = await import('./gateway/worker-protocol.js');
  let workers = 1;
  try {
    workers = values.workers === undefined ? 1 : parseWorkers(values.workers);
  } catch (err) {
    process.stderr.write(`infergate serve: ${(err as Error).message}\n`);
    return 2;
  }
  // forked by a parent of --workers N (gateway/workers.ts): one worker
  const role = workerRoleFromEnv();
  if (!values.config) {
    process.stderr.write(`infergate serve: --config FILE is required\n\n${SERVE_HELP}`);
    return 2;
  }
  const { loadConfigChecked, ConfigError, formatProblems } = await import('./config/load.js');
  let config;
  try {
    const checked = loadConfigChecked(values.config);
    config = checked.config;
    if (checked.warnings.length) process.stderr.write(`${formatProblems(values.config, checked.warnings, 'warning')}\n`);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 1;
    }
    throw err;
  }
  if (role === undefined && workers > 1) {
    const { runWorkers } = await import('./gateway/workers.js');
    return runWorkers(config, values.config, workers);
  }
  const { runGateway } = await import('./gateway/run.js');
  return runGateway(config, values.config, role);
}

async function checkConfig(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: true,
  });
  const file = values.config ?? positionals[0];
  if (values.help || !file) {
    process.stdout.write(
      'Usage: infergate check-config FILE\n\nValidates FILE without starting anything: prints "ok" (exit 0) or each problem with its key path and\n' +
        'line (exit 1). Files the config names (TLS certificate and key, any *_file key) must exist and be readable.\n' +
        'Settings that are legal but dangerous (a drain longer than a container\'s stop grace, a first-byte timeout\n' +
        'shorter than a whole non-streamed answer, …) are printed as warnings on stderr and do not fail the check.\n',
    );
    return values.help ? 0 : 2;
  }
  const { loadConfigChecked, ConfigError, formatProblems } = await import('./config/load.js');
  try {
    const { warnings } = loadConfigChecked(file);
    if (warnings.length) process.stderr.write(`${formatProblems(file, warnings, 'warning')}\n`);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 1;
    }
    throw err;
  }
  process.stdout.write('ok\n');
  return 0;
}

function version(): string {
  return infergateVersion();
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err: unknown) => {
    const msg = err instanceof Error ? err.message : String(err);
    // node's parseArgs refusing an option or a missing value is a usage error: exit 2, as everywhere
    const usage = String((err as { code?: unknown }).code ?? '').startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`infergate: ${msg}${usage ? '\n(infergate COMMAND --help lists the options)' : ''}\n`);
    process.exitCode = usage ? 2 : 1;
  },
);
