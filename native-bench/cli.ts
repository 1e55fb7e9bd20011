/**
 * `npm run bench -- SCENARIO [options]`: infergate's benchmarks.
 *   overhead  proxy cost against direct, nginx and the bare relay (wrk)     → DIR/overhead.json
 *   picker    router pick time and prefix-index memory                        → DIR/picker.json
 *   policies  live replay of a trace through the gateway, per policy, vs simulate → DIR/result.json, DIR/report.html
 *   mock      SSE events/s one `infergate mock --count K` process emits, and its CPU → DIR/mock.json
 * `--out DIR` (default bench-out/). See native-bench/README.md.
 */
import { parseArgs, numOpt } from './common.js';

const USAGE = `usage: npm run bench -- SCENARIO [options]

scenarios:
  overhead   [--connections 10,50,200] [--duration 5] [--modes json,sse] [--targets direct,nginx,relay,infergate]
             [--fixed-duration 5] [--fixed-rate-max 5000] [--profile] [--out DIR]
  picker     [--endpoints 64] [--blocks 200000] [--prompt-chars 16384] [--picks 20000] [--out DIR]
  policies   [--trace FILE | --generate NAME] [--endpoints N] [--time-scale X] [--requests LIMIT]
             [--policies round_robin,least_request,scored] [--lag-bound-ms 50] [--no-sim] [--out DIR]
  mock       [--count 8] [--connections 64] [--duration 5] [--max-tokens 256] [--time-scale 20] [--out DIR]

--out defaults to bench-out/.`;

async function main(): Promise<void> {
  const { positional, opts } = parseArgs(process.argv.slice(2));
  const scenario = positional[0];
  switch (scenario) {
    case 'overhead': {
      const { runOverhead } = await import('./overhead.js');
      return runOverhead(opts);
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
    case 'mock': {
      const { runMock } = await import('./mock.js');
      return runMock(opts);
    }
    case 'upstream': {
      // Internal: the fast test upstream of `overhead`, as its own process.
      const { startUpstream, UPSTREAM_MODEL } = await import('./upstream.js');
      const port = numOpt(opts, 'port', 0);
      await startUpstream(port, opts.get('model') ?? UPSTREAM_MODEL);
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
      console.error(scenario && scenario !== 'help' && scenario !== '--help' ? `unknown scenario: ${scenario}\n\n${USAGE}` : USAGE);
      process.exitCode = scenario ? 2 : 0;
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
