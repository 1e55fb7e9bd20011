/**
 * `npm run bench -- SCENARIO [options]`: infergate's benchmarks.
 *   overhead  proxy cost against direct, nginx and the bare relay (wrk)     → DIR/overhead.json
 *   streams   S long paced SSE streams held through nginx and infergate: CPU, RSS, delay per event → DIR/streams.json
 *   picker    router pick time and prefix-index memory                        → DIR/picker.json
 *   policies  live replay of a trace through the gateway, per policy, vs simulate → DIR/result.json, DIR/report.html
 *   auth      requests/s with auth off vs JWT (cached, uncached), and the cost of one verification → DIR/auth.json
 *   mock      SSE events/s one `infergate mock --count K` process emits, and its CPU → DIR/mock.json
 *   quota     tenant-quota admission cost, in memory and on a local redis-server   → DIR/quota.json
 *   reliability  attacker classes, overload, soak and body-parsing cost against a real gateway → DIR/reliability.json
 *   sim-targets  issue #17's overload targets in the simulator, per workload, rate scale and seed → DIR/sim-targets.json
 * `--out DIR` (default bench-out/). See native-bench/README.md.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { numOpt } from './common.js';
import { ENGINE_FLAGS } from './engine-flags.js';

type Options = NonNullable<ParseArgsConfig['options']>;
const str = { type: 'string' } as const;
const flag = { type: 'boolean' } as const;

/** Each scenario's usage and options (every option takes a value unless it is a flag). */
const SCENARIOS: Record<string, { usage: string; options: Options; hidden?: boolean }> = {
  overhead: {
    usage: `overhead   [--connections 10,50,200] [--duration 5] [--modes json,sse] [--targets direct,nginx,relay,infergate] [--workers N]
             [--fixed-duration 5] [--fixed-rate-max 5000] [--profile] [--out DIR]`,
    options: { connections: str, duration: str, modes: str, targets: str, workers: str, 'fixed-duration': str, 'fixed-rate-max': str, profile: flag, out: str },
  },
  streams: {
    usage: `streams    [--streams 100,1000,4000] [--events 256] [--rate 30] [--duration 10] [--warmup 2] [--ramp 1]
             [--targets direct,nginx,infergate(,relay)] [--lag-bound-ms 50] [--profile] [--out DIR]`,
    options: { streams: str, events: str, rate: str, duration: str, warmup: str, ramp: str, targets: str, 'lag-bound-ms': str, profile: flag, out: str },
  },
  picker: {
    usage: 'picker     [--endpoints 64] [--blocks 200000] [--prompt-chars 16384] [--picks 20000] [--policy scored] [--out DIR]',
    options: { endpoints: str, blocks: str, 'prompt-chars': str, picks: str, policy: str, out: str },
  },
  policies: {
    usage: `policies   [--trace FILE | --generate NAME] [--endpoints N] [--time-scale X] [--requests LIMIT] [--seed 1]
             [--policies round_robin,least_request,scored] [--lag-bound-ms 50] [--drain-s 120]
             [--metrics-interval-ms 50] [--stale-after-ms 1000] [--slo-ttft 1s,2s,5s] [--slo-itl 100ms]
             [--slo-headline 2s] [--no-sim] [${ENGINE_FLAGS.map(([f]) => `--${f} N`).join(' ')}] [--out DIR]`,
    options: {
      trace: str, generate: str, endpoints: str, 'time-scale': str, requests: str, seed: str, policies: str, 'lag-bound-ms': str,
      'drain-s': str, 'metrics-interval-ms': str, 'stale-after-ms': str, 'slo-ttft': str, 'slo-itl': str, 'slo-headline': str, 'no-sim': flag, out: str,
      ...Object.fromEntries(ENGINE_FLAGS.map(([f]) => [f, str])),
    },
  },
  auth: {
    usage: 'auth       [--connections 50] [--duration 5] [--rounds 3] [--tokens 1000] [--verifications 2000] [--out DIR]',
    options: { connections: str, duration: str, rounds: str, tokens: str, verifications: str, out: str },
  },
  mock: {
    usage: 'mock       [--count 8] [--connections 64] [--duration 5] [--max-tokens 256] [--time-scale 20] [--out DIR]',
    options: { count: str, connections: str, duration: str, 'max-tokens': str, 'time-scale': str, out: str },
  },
  quota: {
    usage: 'quota      [--ops 200000] [--sequential 5000] [--concurrency 64] [--duration 3] [--out DIR]',
    options: { ops: str, sequential: str, concurrency: str, duration: str, out: str },
  },
  reliability: {
    usage: 'reliability [--quick] [--cases 40] [--overload-s 60] [--soak-s 600] [--offered 4] [--heavy 2] [--out DIR]',
    options: { quick: flag, cases: str, 'overload-s': str, 'soak-s': str, offered: str, heavy: str, out: str },
  },
  'sim-targets': {
    usage: 'sim-targets [--seeds 1,2,3] [--only trace,no-sharing,...] [--trace FILE] [--config FILE] [--out DIR]',
    options: { seeds: str, only: str, trace: str, config: str, out: str },
  },
  // internal: started by the scenarios above as child processes
  'picker-child': { usage: '', options: { endpoints: str, blocks: str, 'prompt-chars': str, picks: str, policy: str }, hidden: true },
  upstream: { usage: '', options: { port: str, model: str, events: str, rate: str }, hidden: true },
  relay: { usage: '', options: { port: str, upstream: str }, hidden: true },
};

const USAGE = `usage: npm run bench -- SCENARIO [options]     (SCENARIO --help: that scenario's options)

scenarios:
${Object.values(SCENARIOS)
  .filter((s) => !s.hidden)
  .map((s) => `  ${s.usage}`)
  .join('\n')}

--out defaults to bench-out/.`;

/**
 * The scenario and its options, read with node's parseArgs: an unknown option or one without its value is a
 * usage error (exit 2) that lists the known ones; --help prints the usage and runs nothing (exit 0).
 */
function readArgs(argv: string[]): { scenario: string; opts: Map<string, string> } | number {
  const [scenario, ...rest] = argv;
  if (scenario === undefined || scenario === 'help' || scenario === '--help' || scenario === '-h') {
    (scenario === undefined ? console.error : console.log)(USAGE);
    return scenario === undefined ? 2 : 0;
  }
  const spec = SCENARIOS[scenario];
  if (!spec) {
    console.error(`unknown scenario: ${scenario}\n\n${USAGE}`);
    return 2;
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: rest, options: { ...spec.options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    const known = Object.keys(spec.options).map((o) => `--${o}`).join(' ');
    console.error(`bench ${scenario}: ${(err as Error).message}\nknown options: ${known} --help`);
    return 2;
  }
  if (values.help) {
    console.log(`usage: npm run bench -- ${spec.usage || scenario}\n\nSee native-bench/README.md for what it measures and writes.`);
    return 0;
  }
  const opts = new Map<string, string>();
  for (const [k, v] of Object.entries(values)) if (v !== undefined && v !== false) opts.set(k, String(v));
  return { scenario, opts };
}

async function main(): Promise<void> {
  const args = readArgs(process.argv.slice(2));
  if (typeof args === 'number') {
    process.exitCode = args;
    return;
  }
  const { scenario, opts } = args;
  switch (scenario) {
    case 'overhead': {
      const { runOverhead } = await import('./overhead.js');
      return runOverhead(opts);
    }
    case 'streams': {
      const { runStreams } = await import('./streams.js');
      return runStreams(opts);
    }
    case 'sim-targets': {
      const { runSimTargets } = await import('./sim-targets.js');
      return runSimTargets(opts);
    }
    case 'picker': {
      const { runPicker } = await import('./picker.js');
      return runPicker(opts);
    }
    case 'picker-child': {
      const { pickerChild } = await import('./picker.js');
      return pickerChild(opts);
    }
    case 'policies': {
      const { runPolicies } = await import('./policies.js');
      const code = await runPolicies(opts);
      process.exitCode = code;
      return;
    }
    case 'auth': {
      const { runAuth } = await import('./auth.js');
      return runAuth(opts);
    }
    case 'mock': {
      const { runMock } = await import('./mock.js');
      return runMock(opts);
    }
    case 'quota': {
      const { runQuota } = await import('./quota.js');
      return runQuota(opts);
    }
    case 'reliability': {
      const { runReliability } = await import('./reliability.js');
      process.exitCode = await runReliability(opts);
      return;
    }
    case 'upstream': {
      // Internal: the fast test upstream of `overhead` (and, with --rate, the paced one of `streams`), as its own process.
      const { startUpstream, UPSTREAM_MODEL } = await import('./upstream.js');
      const port = numOpt(opts, 'port', 0);
      const rate = numOpt(opts, 'rate', 0);
      const paced = rate > 0 ? { events: numOpt(opts, 'events', 256), rate } : undefined;
      await startUpstream(port, opts.get('model') ?? UPSTREAM_MODEL, paced);
      console.log(`upstream listening on http://127.0.0.1:${port}`);
      const stop = (): void => process.exit(0);
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
      return;
    }
    case 'relay': {
      // Internal: the `relay` target of `overhead` (the bare uWS + undici floor), as its own process.
      const { startRelay } = await import('./relay.js');
      const port = numOpt(opts, 'port', 0);
      await startRelay(port, opts.get('upstream') ?? '');
      console.log(`relay listening on http://127.0.0.1:${port}`);
      const stop = (): void => process.exit(0);
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
      return;
    }
    default:
      throw new Error(`no runner for scenario ${scenario}`); // SCENARIOS lists only scenarios handled above
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
