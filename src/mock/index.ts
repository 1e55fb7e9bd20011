/**
 * `infergate mock`: K simulated vLLM servers in one process (ports N..N+K-1), each its own engine.
 */
import { parseArgs } from 'node:util';
import { ENGINE_FLAG_OPTIONS, ENGINE_FLAGS_HELP, engineProfileFromFlags, numberFlag } from '../engine/index.js';
import { MockServer } from './server.js';
import type { FailMode, MockOptions } from './options.js';
import { exitDespiteIdleConnections } from '../common/listen.js';

export { MockServer } from './server.js';
export type { MockOptions, FailMode, MetricsFault } from './options.js';

export interface MockServers {
  endpoints: string[];
  servers: MockServer[];
  close(): Promise<void>;
}

export async function startMockServers(
  opts: MockOptions & { port: number; count?: number; host?: string },
): Promise<MockServers> {
  const host = opts.host ?? '127.0.0.1';
  const count = opts.count ?? 1;
  if (!Number.isInteger(count) || count < 1) throw new Error('mock: count must be a positive integer');
  const servers: MockServer[] = [];
  try {
    for (let i = 0; i < count; i++) {
      // port 0: every server takes its own free port (the ports after an ephemeral one may be taken)
      const port = opts.port === 0 ? 0 : opts.port + i;
      const s = new MockServer(opts, host, port);
      servers.push(s);
      await s.listen();
    }
  } catch (e) {
    for (const s of servers) s.close();
    throw e;
  }
  return {
    endpoints: servers.map((s) => s.endpoint),
    servers,
    async close() {
      for (const s of servers) s.close();
    },
  };
}

export const MOCK_USAGE = `usage: infergate mock --port N --model NAME [options]
  --count K                    K servers on ports N..N+K-1 (default 1)
  --host H                     listen address (default 127.0.0.1)
${ENGINE_FLAGS_HELP}
  --time-scale X               run X times faster than real time (default 1)
  --seed N                     output text seed (default 0)
  --fail-rate X                probability of an injected failure per request (default 0)
  --fail-mode M                refuse | 500 | cut | mixed (default mixed)
  --metrics-hang-after S       GET /metrics stops answering after S seconds
  --response-store N           Responses API answers kept per server for previous_response_id,
                               GET /v1/responses/{id} and its /cancel (LRU, default 1024; 0: none
                               kept, every previous_response_id is a 404, background: true a 400)
  --tls-cert FILE --tls-key FILE  serve HTTPS with this PEM certificate and key
Admin: POST /mock/faults {"metrics":"ok"|"hang"|"error","fail_rate":X,"fail_mode":M}; GET /mock/state.`;

export function parseMockArgs(argv: string[]): MockOptions & { port: number; count: number; host: string } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string', short: 'p' },
      model: { type: 'string', short: 'm' },
      count: { type: 'string' },
      host: { type: 'string' },
      ...ENGINE_FLAG_OPTIONS,
      'time-scale': { type: 'string' },
      seed: { type: 'string' },
      'fail-rate': { type: 'string' },
      'fail-mode': { type: 'string' },
      'metrics-hang-after': { type: 'string' },
      'response-store': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) throw new HelpRequested();
  const port = numberFlag('port', values.port, { int: true, min: 0, max: 65535 });
  if (port === undefined) throw new Error('--port is required');
  if (!values.model) throw new Error('--model is required');
  const failMode = values['fail-mode'];
  if (failMode !== undefined && !['refuse', '500', 'cut', 'mixed'].includes(failMode)) {
    throw new Error(`--fail-mode: expected refuse, 500, cut or mixed, got ${JSON.stringify(failMode)}`);
  }
  const tlsCert = values['tls-cert'];
  const tlsKey = values['tls-key'];
  if ((tlsCert === undefined) !== (tlsKey === undefined)) throw new Error('--tls-cert and --tls-key go together');
  const count = numberFlag('count', values.count, { int: true, min: 1 }) ?? 1;
  if (port + count - 1 > 65535) throw new Error('--port/--count: ports beyond 65535');
  return {
    port,
    count,
    host: values.host ?? '127.0.0.1',
    model: values.model,
    profile: engineProfileFromFlags(values),
    timeScale: numberFlag('time-scale', values['time-scale'], { min: 1e-9 }),
    seed: numberFlag('seed', values.seed, { int: true }),
    failRate: numberFlag('fail-rate', values['fail-rate'], { min: 0, max: 1 }),
    failMode: failMode as FailMode | undefined,
    metricsHangAfterS: numberFlag('metrics-hang-after', values['metrics-hang-after'], { min: 0 }),
    responseStore: numberFlag('response-store', values['response-store'], { int: true, min: 0 }),
    ...(tlsCert !== undefined && tlsKey !== undefined && { tls: { cert: tlsCert, key: tlsKey } }),
  };
}

class HelpRequested extends Error {}

/** `infergate mock ...`: runs until SIGTERM/SIGINT; resolves to the exit code. */
export async function mockMain(argv: string[]): Promise<number> {
  let opts: ReturnType<typeof parseMockArgs>;
  try {
    opts = parseMockArgs(argv);
  } catch (e) {
    if (e instanceof HelpRequested) {
      process.stdout.write(MOCK_USAGE + '\n');
      return 0;
    }
    process.stderr.write(`infergate mock: ${(e as Error).message}\n${MOCK_USAGE}\n`);
    return 2;
  }
  let servers: MockServers;
  try {
    servers = await startMockServers(opts);
  } catch (e) {
    process.stderr.write(`infergate mock: ${(e as Error).message}\n`);
    return 1;
  }
  for (const ep of servers.endpoints) process.stdout.write(`mock listening on ${opts.tls ? 'https' : 'http'}://${ep}\n`);
  return new Promise<number>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void servers.close().then(() => {
        exitDespiteIdleConnections(0);
        resolve(0);
      });
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
