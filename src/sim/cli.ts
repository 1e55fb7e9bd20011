/** `infergate simulate`: argument parsing, output (table on stdout, JSON file), exit codes. */
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENGINE_FLAG_OPTIONS, ENGINE_FLAGS_HELP, engineProfileFromFlags, type EngineProfile } from '../engine/index.js';
import { ConfigError, formatProblems } from '../config/load.js';
import { poolSettingsFromFile, type PoolSettings } from './config.js';
import { GENERATORS, generateWorkload } from './generators.js';
import { formatClasses, parsePriorityMix, withPriorities, type PriorityMix } from './priority.js';
import { SIM_POLICIES, SIM_YARDSTICKS, checkPolicies, runSimulation } from './simulate.js';
import { parseDuration } from '../common/units.js';
import { renderReport, type ReportPolicy } from '../report/report.js';
import { REPLICA_SHARES, type ReplicaOptions, type ReplicaShare } from './router-policy.js';
import { headlineOf, sloSpecs } from './slo.js';
import { formatTable, TABLE_LEGEND } from './table.js';
import { checkOverloadTargets, checkTargets, formatOverloadTargets, formatTargets } from './targets.js';
import { loadTrace, toTraceJsonl } from './trace.js';
import { formatTuneReport, tune, type TuneInput } from './tune.js';
import { parseConstraints, type TuneConstraint } from './tune-constraints.js';
import type { SimRequest, SimResult } from './types.js';

/** The trace shipped in the repository (native-bench/traces/README.md), the workload when none is named. */
export const DEFAULT_TRACE = fileURLToPath(new URL('../../native-bench/traces/mooncake-first400.jsonl', import.meta.url));

export const SIMULATE_HELP = `Usage: infergate simulate [--trace FILE | --generate NAME] [options]

Replays traffic in virtual time against N simulated vLLM servers (the mock's engine model), once per
routing policy, with the gateway's own picker; prints a table and writes the result JSON. The same inputs
and --seed give byte-identical JSON. On a terminal, a progress line per policy goes to stderr.

Workload:
  --trace FILE              a Mooncake JSONL trace (timestamp, input_length, output_length, hash_ids);
                            without --trace or --generate: native-bench/traces/mooncake-first400.jsonl,
                            the first 400 requests of the public Mooncake trace, shipped in the repository
  --generate NAME           a seeded generator: ${GENERATORS.join(', ')}
  --requests N              use the first N requests (generators: how many to make; default 1000,
                            shared-prefix 4000, rag 3000)
  --rate X                  generators: mean arrival rate, requests/s (default per generator)
  --rate-scale X[,Y...]     arrivals X times denser (default 1); a list runs each scale in turn
  --save-trace FILE         write the workload (after --requests) as Mooncake JSONL and go on
  --priority-mix C=X,...    give each request a flow-control class, drawn with these shares (e.g.
                            critical=0.2,standard=0.5,sheddable=0.3); figures per class follow the table
Pool:
  --endpoints N             simulated servers (default 8)
  --policies a,b            of ${SIM_POLICIES.join(', ')} (default all);
                            oracle and greedy_estimate read every server's true state (yardsticks): the
                            oracle picks the exact lowest TTFT (each server's state run forward),
                            greedy_estimate an estimate of it
  --config FILE             take scoring/prefix/saturation/metrics, max_num_seqs and the wait queue from
                            this config's first pool
  --seed N                  seeds generators and the random policy (default 1)
  --queue-max-length N      the gateway's wait queue (pools.<p>.queue.max_length): on saturation sheddable
                            requests are refused, the others wait, critical first (default: the --config
                            pool's, else 0: no queue, every class refused)
  --queue-max-wait D        the longest a request waits there before its 429 (default: the --config
                            pool's max_wait, else 10s)
Engine (as for "infergate mock"):
${ENGINE_FLAGS_HELP}
Replicas (several gateways, each with its own router, behind a client-side spread; not the oracle):
  --replicas N              gateway replicas (default 1)
  --share none|events|events+inflight
                            none: each learns only its own picks (default); events: every learned pick
                            reaches the other replicas after --share-delay-ms; events+inflight: that, and
                            each replica's count of requests in flight per endpoint too, which the others'
                            load scorer adds to their own
  --share-delay-ms D        virtual ms before the others apply a replica's pick or count (default 5)
  --share-inflight-period-ms P   with events+inflight: counts go out at the end of every P virtual ms, as
                            a periodic publisher sends them (default 0: at every change)
  --spread round_robin|random   how requests are spread over replicas (default round_robin)
Yardstick:
  --slo-ttft D[,D...]       time-to-first-token bounds, one SLO each (default 1s,2s,5s): a request meets
                            an SLO when it completed within the bound and its mean gap between tokens ≤
                            --slo-itl; rejected and failed requests count as misses; the JSON's slo[] has
                            one entry per bound
  --slo-itl D               the mean inter-token bound (default 100ms); durations need a unit (ms, s, m)
  --slo-headline D          the headline SLO, one of the --slo-ttft bounds (default: the first bound given,
                            or 2s with the default bounds): the table's slo% and good/s, the --html
                            verdict, --targets and --tune use it (marked "headline": true in slo[]), and
                            the oracle never sheds a request some server could answer within it
Output:
  --json FILE               the result JSON (a list of scales: {"sweep": [result, ...]})
  --html FILE               a self-contained HTML report: a verdict (which policy has the most goodput at
                            the headline SLO), the figures with best/worst marked, the offered-TTFT CDF
  --targets                 check the routing-quality targets and the overload targets (src/sim/README.md)
                            on each result
  --tune                    search the scored policy's scorer weights for the most goodput at the headline
                            SLO (--slo-headline, --slo-itl) over --tune-scales and --tune-inputs, choosing the
                            weights with the smallest worst-case regret; prints a table per input and a
                            YAML block to paste into a config (src/sim/README.md, "Tuning")
  --tune-inputs A,B,...     what to tune on (default: the --trace/--generate workload): generator names,
                            "trace" (the shipped trace) or Mooncake JSONL files; --requests applies to each
  --tune-scales X,Y,...     the loads every input is run at (default: --rate-scale if given, else 1,2,3)
  --holdout NAME|all        tune on every input but NAME and report NAME out of sample (the tuned weights'
                            goodput there beside the defaults' and the best found by a search on it
                            alone); all: leave each input out in turn, then tune on all of them
  --tune-max-loss X         the minimax pick may give up a little on one input for a lot on another:
                            weights more than this share (0.02 = 2%) below the defaults' goodput on any
                            input tuned on are never chosen (0: never worse on any; default: no bound)
  --tune-budget N           weight sets each search may evaluate, the defaults included (default 30);
                            each costs one run per input and scale
  --tune-jobs N             worker threads for those runs (default 1); the result does not depend on it
  --tune-constraints A,B    promises a weight set must keep to be chosen, checked on each candidate before
                            it is run (rejected ones are listed): priority (issue #16: critical TTFT p99 at
                            3x overload within 2x unloaded, test/sim/backlog-priority.test.ts), affinity
                            (issue #17: a loaded prefix holder keeps its request within the cache's saving
                            and gives way past it, test/routing/overload-affinity.ts); default none
`;

class UsageError extends Error {}

function num(v: string | undefined, name: string, opts: { int?: boolean; min?: number } = {}): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isFinite(x) || (opts.int && !Number.isInteger(x)) || (opts.min !== undefined && x < opts.min)) {
    throw new UsageError(`--${name} must be ${opts.int ? 'an integer' : 'a number'}${opts.min !== undefined ? ` ≥ ${opts.min}` : ''}, not "${v}"`);
  }
  return x;
}

/** A duration with its unit ("2s", "100ms"), in ms. */
function duration(v: string, name: string): number {
  const ms = /^\d/.test(v.trim()) && !/^\d+(\.\d+)?$/.test(v.trim()) ? parseDuration(v) : null;
  if (ms === null || !(ms > 0)) throw new UsageError(`--${name} takes durations with a unit, such as 2s or 100ms, not "${v}"`);
  return ms;
}

const list = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s !== ''));

/** Where the command writes (tests pass their own). */
export interface SimIo {
  out(s: string): void;
  err(s: string): void;
  /** progress lines go to err only when it is a terminal (a log file or CI stays quiet) */
  progress?: boolean;
}

const STDIO: SimIo = {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
  progress: process.stderr.isTTY === true,
};

/** A progress line for one simulation: which policy finished, how far, and an estimate of the time left. */
function progressReporter(io: SimIo, what: string): ((policy: string, done: number, of: number) => void) | undefined {
  if (!io.progress) return undefined;
  const t0 = performance.now();
  io.err(`${what}: running…\n`);
  return (policy, done, of) => {
    const spent = (performance.now() - t0) / 1000;
    const left = done < of ? `, about ${Math.ceil((spent / done) * (of - done))} s left` : '';
    io.err(`${what}: ${policy} done (${done}/${of}, ${spent.toFixed(1)} s${left})\n`);
  };
}

/** The HTML report of one simulated scale (src/report/). */
function simulationReport(res: SimResult, offered: Map<string, Float64Array> | undefined): string {
  const w = res.workload;
  const policies: ReportPolicy[] = res.runs.map((run) => ({ run, ttftOfferedMs: offered?.get(run.policy) }));
  return renderReport({
    title: `infergate simulate: ${w.trace}, rate ×${w.rate_scale}`,
    about:
      `${w.requests} requests replayed in virtual time against ${w.endpoints} simulated vLLM servers, once per policy, ` +
      `seed ${w.seed}; times are in ms of engine time. The oracle (exact TTFT per server, from its true state run forward) ` +
      'and greedy_estimate (an estimate of it) read every server\'s true state, which no real router can: yardsticks, not candidates.',
    policies,
    valid: true,
    yardsticks: [...SIM_YARDSTICKS],
    settings: { workload: w },
  });
}

/** `infergate simulate ARGS`; resolves to the exit code (0 ok, 1 failure, 2 usage). */
export async function simulateMain(argv: string[], io: SimIo = STDIO): Promise<number> {
  try {
    return await run(argv, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`infergate simulate: ${e.message}\n\n${SIMULATE_HELP}`);
      return 2;
    }
    if (e instanceof ConfigError) {
      io.err(`${formatProblems(e.file, e.problems)}\n`);
      return 1;
    }
    io.err(`infergate simulate: ${(e as Error).message}\n`);
    return 1;
  }
}

async function run(argv: string[], io: SimIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        trace: { type: 'string' },
        generate: { type: 'string' },
        requests: { type: 'string' },
        rate: { type: 'string' },
        'rate-scale': { type: 'string' },
        'save-trace': { type: 'string' },
        'priority-mix': { type: 'string' },
        'queue-max-length': { type: 'string' },
        'queue-max-wait': { type: 'string' },
        endpoints: { type: 'string' },
        policies: { type: 'string' },
        config: { type: 'string' },
        seed: { type: 'string' },
        ...ENGINE_FLAG_OPTIONS,
        replicas: { type: 'string' },
        share: { type: 'string' },
        'share-delay-ms': { type: 'string' },
        'share-inflight-period-ms': { type: 'string' },
        spread: { type: 'string' },
        'slo-ttft': { type: 'string' },
        'slo-itl': { type: 'string' },
        'slo-headline': { type: 'string' },
        json: { type: 'string' },
        html: { type: 'string' },
        targets: { type: 'boolean' },
        tune: { type: 'boolean' },
        'tune-budget': { type: 'string' },
        'tune-inputs': { type: 'string' },
        'tune-scales': { type: 'string' },
        holdout: { type: 'string' },
        'tune-max-loss': { type: 'string' },
        'tune-jobs': { type: 'string' },
        'tune-constraints': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (values.help) {
    io.out(SIMULATE_HELP);
    return 0;
  }
  if (values.trace !== undefined && values.generate !== undefined) {
    throw new UsageError('give one of --trace FILE or --generate NAME, not both');
  }
  const seed = num(values.seed, 'seed', { int: true, min: 0 }) ?? 1;
  const limit = num(values.requests, 'requests', { int: true, min: 1 });
  const endpoints = num(values.endpoints, 'endpoints', { int: true, min: 1 }) ?? 8;
  const scales = (list(values['rate-scale']) ?? ['1']).map((s) => num(s, 'rate-scale', { min: 1e-6 })!);
  let policies: ReturnType<typeof checkPolicies>;
  try {
    policies = checkPolicies(list(values.policies) ?? [...SIM_POLICIES]);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (values.generate !== undefined && !(GENERATORS as readonly string[]).includes(values.generate)) {
    throw new UsageError(`unknown generator "${values.generate}" (one of: ${GENERATORS.join(', ')})`);
  }

  let profile: Partial<EngineProfile>;
  try {
    profile = engineProfileFromFlags(values);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }

  const share = values.share ?? 'none';
  if (!(REPLICA_SHARES as readonly string[]).includes(share)) throw new UsageError(`--share must be one of ${REPLICA_SHARES.join(', ')}, not "${share}"`);
  const spread = values.spread ?? 'round_robin';
  if (spread !== 'round_robin' && spread !== 'random') throw new UsageError(`--spread must be round_robin or random, not "${spread}"`);
  const replicas: ReplicaOptions = {
    replicas: num(values.replicas, 'replicas', { int: true, min: 1 }) ?? 1,
    share: share as ReplicaShare,
    shareDelayMs: num(values['share-delay-ms'], 'share-delay-ms', { min: 0 }) ?? 5,
    inflightPeriodMs: num(values['share-inflight-period-ms'], 'share-inflight-period-ms', { min: 0 }) ?? 0,
    spread,
  };

  let slos: ReturnType<typeof sloSpecs>;
  try {
    slos = sloSpecs(
      list(values['slo-ttft'])?.map((v) => duration(v, 'slo-ttft')),
      values['slo-itl'] === undefined ? undefined : duration(values['slo-itl'], 'slo-itl'),
      values['slo-headline'] === undefined ? undefined : duration(values['slo-headline'], 'slo-headline'),
    );
  } catch (e) {
    throw new UsageError((e as Error).message);
  }

  const pool: PoolSettings = values.config !== undefined ? poolSettingsFromFile(values.config) : {};

  let requests: SimRequest[];
  let label: string;
  if (values.generate === undefined) {
    const trace = values.trace ?? DEFAULT_TRACE;
    requests = loadTrace(trace, limit);
    label = values.trace ?? 'mooncake-first400 (shipped)';
  } else {
    requests = generateWorkload(values.generate!, {
      seed,
      requests: limit,
      rate: num(values.rate, 'rate', { min: 1e-6 }),
      loras: profile.loras,
    });
    label = values.generate!;
  }
  if (values['save-trace'] !== undefined) writeFileSync(values['save-trace'], toTraceJsonl(requests));
  let priorityMix: PriorityMix | undefined;
  if (values['priority-mix'] !== undefined) {
    try {
      priorityMix = parsePriorityMix(values['priority-mix']);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    requests = withPriorities(requests, priorityMix, seed);
  }
  // the wait queue: the flags, else the config's pool (pools.<p>.queue), else none
  const queueLength = num(values['queue-max-length'], 'queue-max-length', { int: true, min: 0 }) ?? (values['queue-max-length'] === undefined ? pool.queue?.maxLength : undefined) ?? 0;
  const queueWait = values['queue-max-wait'] !== undefined ? duration(values['queue-max-wait'], 'queue-max-wait') : (pool.queue?.maxWaitMs ?? 10_000);
  const queue = queueLength > 0 ? { maxLength: queueLength, maxWaitMs: queueWait } : undefined;

  if (values.tune) {
    for (const flag of ['replicas', 'queue-max-length', 'priority-mix', 'html', 'targets'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--tune runs one gateway's scored policy without a queue or classes; it does not take --${flag}`);
    }
    if (pool.queue) process.stderr.write(`simulate: --tune runs without a wait queue; the config's queue (max_length ${pool.queue.maxLength}) is not modelled\n`);
    const budget = num(values['tune-budget'], 'tune-budget', { int: true, min: 1 }) ?? 30;
    const tuneScales = (list(values['tune-scales']) ?? list(values['rate-scale']) ?? ['1', '2', '3']).map((s) => num(s, 'tune-scales', { min: 1e-6 })!);
    const inputs: TuneInput[] = [];
    for (const name of list(values['tune-inputs']) ?? []) {
      if ((GENERATORS as readonly string[]).includes(name)) {
        inputs.push({ name, requests: generateWorkload(name, { seed, requests: limit, loras: profile.loras }) });
      } else if (name === 'trace') {
        inputs.push({ name: 'mooncake-first400', requests: loadTrace(DEFAULT_TRACE, limit) });
      } else if (name.includes('/') || name.endsWith('.jsonl')) {
        inputs.push({ name: basename(name).replace(/\.jsonl$/, ''), requests: loadTrace(name, limit) });
      } else {
        throw new UsageError(`--tune-inputs: "${name}" is neither a generator (${GENERATORS.join(', ')}), "trace", nor a .jsonl file`);
      }
    }
    if (inputs.length === 0) inputs.push({ name: values.generate ?? (values.trace === undefined ? 'mooncake-first400' : basename(values.trace).replace(/\.jsonl$/, '')), requests });
    const names = inputs.map((i) => i.name);
    if (new Set(names).size !== names.length) throw new UsageError(`--tune-inputs names an input twice: ${names.join(', ')}`);
    const holdout = values.holdout;
    if (holdout !== undefined) {
      if (holdout !== 'all' && !names.includes(holdout)) throw new UsageError(`--holdout ${holdout}: not one of the inputs (${names.join(', ')})`);
      if (names.length < 2) throw new UsageError('--holdout needs at least two --tune-inputs');
    }
    const maxLoss = num(values['tune-max-loss'], 'tune-max-loss', { min: 0 });
    if (maxLoss !== undefined && maxLoss > 1) throw new UsageError(`--tune-max-loss is a share between 0 and 1, not "${values['tune-max-loss']}"`);
    const jobs = num(values['tune-jobs'], 'tune-jobs', { int: true, min: 1 }) ?? 1;
    let constraints: TuneConstraint[] = [];
    try {
      constraints = values['tune-constraints'] === undefined ? [] : parseConstraints(values['tune-constraints']);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const report = await tune({ inputs, scales: tuneScales, endpoints, profile, pool, seed, budget, slo: headlineOf(slos)!, holdout, maxLoss, jobs, constraints, log: (l) => io.err(`${l}\n`) });
    io.out(formatTuneReport(report));
    if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ tune: report }, null, 2) + '\n');
    return 0;
  }

  const results: SimResult[] = [];
  const htmlFile = values.html;
  // per scale, per policy: each offered request's TTFT (Infinity when shed or failed), for the report's CDF
  const offered = new Map<number, Map<string, Float64Array>>();
  const records = (scale: number) => {
    const byPolicy = new Map<string, Float64Array>();
    offered.set(scale, byPolicy);
    return (policy: string, rec: { index: number; outcome: string; ttftMs: number }) => {
      let a = byPolicy.get(policy);
      if (!a) byPolicy.set(policy, (a = new Float64Array(requests.length).fill(Infinity)));
      if (rec.outcome === 'completed') a[rec.index] = rec.ttftMs;
    };
  };
  for (const scale of scales) {
    const onPolicyDone = progressReporter(io, `x${scale}, ${requests.length} requests, ${endpoints} endpoints`);
    const res = runSimulation({ requests, trace: label, endpoints, profile, policies, pool, seed, rateScale: scale, onPolicyDone, slos, replicas, queue, priorityMix, onRecord: values.html === undefined ? undefined : records(scale) });
    results.push(res);
    io.out(formatTable(res));
    io.out(formatClasses(res.runs));
    if (values.targets) io.out(formatTargets(checkTargets(res)) + formatOverloadTargets(checkOverloadTargets(res)));
    if (scales.length > 1) io.out('\n');
  }
  io.out(TABLE_LEGEND);
  if (values.json !== undefined) {
    const out = results.length === 1 ? results[0] : { sweep: results };
    writeFileSync(values.json, JSON.stringify(out, null, 2) + '\n');
  }
  if (htmlFile !== undefined) {
    results.forEach((res, i) => {
      const scale = scales[i];
      const file = results.length === 1 ? htmlFile : htmlFile.replace(/(\.html?)?$/, (ext) => `-x${scale}${ext || '.html'}`);
      writeFileSync(file, simulationReport(res, offered.get(scale)));
      io.err(`wrote ${file}\n`);
    });
  }
  return 0;
}
