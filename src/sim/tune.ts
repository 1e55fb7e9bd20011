/**
 * --tune: a deterministic coordinate search over the scored policy's scorer weights for goodput at an SLO
 * (by default TTFT ≤ 2 s and mean ITL ≤ 100 ms; shed and failed requests are misses) across several loads
 * and several inputs (traces or generators), choosing the weights with the smallest worst-case regret
 * (tune-objective.ts), and checking them on inputs the search did not see (hold one out, or each in turn).
 * Weight sets that break a promise named in `constraints` (tune-constraints.ts) are not admissible: each
 * candidate is checked first, and one that fails is listed in the report and never run on the inputs.
 *
 * One evaluation of a candidate = one `scored` run per (input, rate scale); an input's goodput is the mean
 * over its scales. Runs are deterministic, so they are cached by (weights, input, scale) and shared by every
 * search of one call (leave-one-out's folds mostly revisit the same first moves).
 */
import type { EngineProfile } from '../engine/index.js';
import { SCORER_NAMES, type ScoringWeights } from '../routing/index.js';
import { simConfig, type PoolSettings } from './config.js';
import { endpointName } from './router-policy.js';
import { LocalRunner, WorkerPool, type RunSetup, type RunTask, type ScaleFigures } from './tune-pool.js';
import type { ConstraintCheck, TuneConstraint } from './tune-constraints.js';
import { DEFAULT_SLOS, headlineOf, type SloSpec } from './slo.js';
import { round } from './stats.js';
import { minimaxPick, regrets } from './tune-objective.js';
import type { SimRequest } from './types.js';

export type { ScaleFigures } from './tune-pool.js';

export interface TuneInput {
  /** a generator's name or a trace's file name: how it is reported and named by `holdout` */
  name: string;
  requests: readonly SimRequest[];
}

export interface TuneOptions {
  inputs: readonly TuneInput[];
  /** rate scales every input is run at (each an arrival compression, as --rate-scale) */
  scales: readonly number[];
  endpoints: number;
  profile: Partial<EngineProfile>;
  /** the starting point (the config's pool, or routing's defaults when empty) */
  pool: PoolSettings;
  seed: number;
  /** candidate weight sets per search, the start included (default 30) */
  budget?: number;
  /** the objective's SLO (default: 2 s TTFT, 100 ms mean ITL) */
  slo?: SloSpec;
  /** an input's name: tune on the others and report this one out of sample; 'all': each in turn */
  holdout?: string;
  /**
   * the most goodput the chosen weights may lose against the defaults on any input tuned on, as a share
   * (0.02: 2%; 0: never worse anywhere); default: no bound (pure minimax regret)
   */
  maxLoss?: number;
  /** worker threads for the runs (default 1: all in this thread); the result does not depend on it */
  jobs?: number;
  /** promises a weight set must keep to be chosen (tune-constraints.ts; default none) */
  constraints?: readonly TuneConstraint[];
  /** progress lines (e.g. to stderr) */
  log?: (line: string) => void;
}

export interface InputFigures {
  input: string;
  /** whether the chosen weights were searched on this input */
  tuned_on: boolean;
  /** goodput at the SLO, requests/s, mean over the rate scales */
  defaults_goodput: number;
  tuned_goodput: number;
  /** the highest goodput any weight set evaluated in this call reached on this input */
  best_goodput: number;
  /** (best − goodput) / best */
  defaults_regret: number;
  tuned_regret: number;
  scales: Array<{ rate_scale: number; defaults: ScaleFigures; tuned: ScaleFigures }>;
}

export interface HoldoutFigures {
  /** the held-out input */
  input: string;
  /** the weights tuned on every other input */
  weights: ScoringWeights;
  defaults_goodput: number;
  tuned_goodput: number;
  /** the best found there: a search on this input alone, and every other weight set evaluated on it */
  best_goodput: number;
  /** (tuned − defaults) / defaults */
  change: number;
  defaults_regret: number;
  tuned_regret: number;
}

export interface TuneReport {
  objective: { slo_ttft_ms: number; slo_itl_ms: number; rate_scales: number[]; regret: string; max_loss: number | null };
  inputs: Array<{ name: string; requests: number }>;
  /** the starting weights (the config's, or the shipped defaults) */
  defaults: ScoringWeights;
  /** the minimax-regret weights of the search on `tuned_on` */
  tuned: ScoringWeights;
  tuned_on: string[];
  /** weight sets evaluated by that search (the defaults included) */
  candidates: number;
  /** simulation runs made in all (each (weights, input, scale) once) */
  runs: number;
  /** over `tuned_on` */
  worst_regret: { defaults: number; tuned: number };
  per_input: InputFigures[];
  /** out of sample: one entry per held-out input */
  holdout: HoldoutFigures[];
  /** leave-one-out only: does tuning beat the defaults on inputs it did not see? */
  out_of_sample?: {
    mean_change: number;
    worst_change: number;
    /** the largest held-out regret of the weights tuned without that input, and of the defaults there */
    worst_regret: { defaults: number; tuned: number };
    beats_defaults: boolean;
    rule: string;
  };
  /** the constraints checked on every candidate (absent when none were asked for) */
  constraints?: {
    names: TuneConstraint[];
    /** the starting weights' checks (they stay the baseline even when one fails) */
    defaults: ConstraintCheck[];
    /** the chosen weights' checks */
    tuned: ConstraintCheck[];
    /** every weight set a search of this call rejected, in the order met, with the checks it failed */
    rejected: Array<{ weights: ScoringWeights; failed: ConstraintCheck[] }>;
    /** weight sets checked in all */
    checked: number;
  };
  /**
   * leave-one-out only: whether to ship the tuned weights as the defaults: they differ from the defaults,
   * beat them out of sample, and keep every constraint asked for
   */
  ship?: { ship: boolean; reason: string };
  /** the tuned weights as a config block */
  yaml: string;
}

/** The rule for "beats the defaults out of sample" (leave-one-out). */
export const OUT_OF_SAMPLE_RULE = "the tuned weights' worst held-out regret is below the defaults' by more than half a point and their mean held-out goodput change is above +0.5%";

/**
 * How much better out of sample counts as better: smaller differences are ties, and a tie keeps the
 * defaults. At 500 requests per input a change of weights moves goodput by a few tenths of a percent either
 * way on inputs it does not help (seen: +0.04% out of sample turning into -5.7% on the full trace).
 */
export const OUT_OF_SAMPLE_MARGIN = 0.005;

type Point = ScoringWeights;
const keyOf = (p: Point) => SCORER_NAMES.map((k) => p[k]).join(',');
const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** Coordinate moves from p with step factor f: each weight ×f and ÷f, 0 (when f ≥ 2), 1 when it is 0. */
function moves(p: Point, f: number): Point[] {
  const out: Point[] = [];
  for (const k of SCORER_NAMES) {
    const v = p[k];
    const cands = v > 0 ? [v * f, v / f] : [1];
    if (v > 0 && f >= 2) cands.push(0);
    for (const c of cands) out.push({ ...p, [k]: round3(c) });
  }
  return out;
}

/** Runs the simulation per (weights, input, scale) at most once, and each constraint check per weights once. */
class Evaluator {
  private readonly runsByKey = new Map<string, ScaleFigures>();
  private readonly checksByKey = new Map<string, ConstraintCheck>();
  /** weight sets rejected by a search, in the (deterministic) order the searches met them */
  readonly rejected = new Map<string, { weights: Point; failed: ConstraintCheck[] }>();
  private readonly goodputs = new Map<string, Map<string, number>>(); // input → weights key → mean goodput
  private readonly local: LocalRunner;
  runs = 0;
  constructor(
    private readonly setup: RunSetup,
    private readonly pool: WorkerPool | undefined,
    readonly constraints: readonly TuneConstraint[],
  ) {
    this.local = new LocalRunner(setup);
    for (const input of setup.inputs) this.goodputs.set(input.name, new Map());
  }

  private key = (p: Point, input: string, scale: number) => `${keyOf(p)}|${input}|${scale}`;

  /** Runs what these weight sets need on these inputs, in parallel on the pool (a no-op without one). */
  async prefetch(points: readonly Point[], inputs: readonly string[]): Promise<void> {
    const pool = this.pool;
    if (!pool) return;
    const todo = new Map<string, RunTask>();
    for (const p of points) {
      for (const input of inputs) {
        for (const scale of this.setup.scales) {
          const k = this.key(p, input, scale);
          if (!this.runsByKey.has(k) && !todo.has(k)) todo.set(k, { weights: { ...p }, input, scale });
        }
      }
    }
    await Promise.all(
      [...todo].map(async ([k, t]) => {
        const f = await pool.run(t);
        this.runs++;
        this.runsByKey.set(k, f);
      }),
    );
  }

  /** Runs the constraint checks of these weight sets, in parallel on the pool (a no-op without one). */
  async prefetchChecks(points: readonly Point[]): Promise<void> {
    const pool = this.pool;
    if (!pool) return;
    const todo = new Map<string, { weights: Point; constraint: TuneConstraint }>();
    for (const p of points) {
      for (const c of this.constraints) {
        const k = `${keyOf(p)}|${c}`;
        if (!this.checksByKey.has(k) && !todo.has(k)) todo.set(k, { weights: { ...p }, constraint: c });
      }
    }
    await Promise.all([...todo].map(async ([k, t]) => this.checksByKey.set(k, await pool.check(t))));
  }

  /** every constraint's check of p, in the order asked for */
  checks(p: Point): ConstraintCheck[] {
    return this.constraints.map((c) => {
      const k = `${keyOf(p)}|${c}`;
      let r = this.checksByKey.get(k);
      if (!r) {
        r = this.local.check({ weights: p, constraint: c });
        this.checksByKey.set(k, r);
      }
      return r;
    });
  }

  get checked(): number {
    return new Set([...this.checksByKey.keys()].map((k) => k.slice(0, k.lastIndexOf('|')))).size;
  }

  figures(p: Point, input: string): Array<{ rate_scale: number } & ScaleFigures> {
    return this.setup.scales.map((scale) => {
      const key = this.key(p, input, scale);
      let f = this.runsByKey.get(key);
      if (!f) {
        this.runs++;
        f = this.local.run({ weights: p, input, scale });
        this.runsByKey.set(key, f);
      }
      return { rate_scale: scale, ...f };
    });
  }

  /** mean goodput over the scales */
  goodput(p: Point, input: string): number {
    const figs = this.figures(p, input);
    const g = figs.reduce((a, f) => a + f.goodput_rps, 0) / figs.length;
    this.goodputs.get(input)!.set(keyOf(p), g);
    return g;
  }

  /** the best mean goodput of any weight set evaluated on this input so far */
  best(input: string): number {
    return Math.max(0, ...this.goodputs.get(input)!.values());
  }
}

interface SearchResult {
  best: Point;
  candidates: number;
}

async function search(ev: Evaluator, start: Point, on: readonly string[], budget: number, maxLoss: number, what: string, log: (l: string) => void, t0: number): Promise<SearchResult> {
  await Promise.all([ev.prefetch([start], on), ev.prefetchChecks([start])]);
  const points: Point[] = [start]; // the admissible weight sets (and the start, the baseline, whatever its checks)
  let rejected = 0;
  const considered = () => points.length + rejected;
  const seen = new Set([keyOf(start)]);
  const table: number[][] = [on.map((i) => ev.goodput(start, i))];
  let pick = 0;
  const worstOf = (c: number) => regrets(table).worst[c];
  let f = 2;
  while (considered() < budget && f > 1.05) {
    let improved = false;
    const sweep = moves(points[pick], f);
    // what this sweep will evaluate (the loop below, which decides, then finds every check and run done)
    const fresh: Point[] = [];
    const keys = new Set<string>();
    for (const c of sweep) {
      const k = keyOf(c);
      if (!seen.has(k) && !keys.has(k) && considered() + fresh.length < budget) {
        keys.add(k);
        fresh.push(c);
      }
    }
    await ev.prefetchChecks(fresh);
    await ev.prefetch(fresh.filter((c) => ev.checks(c).every((x) => x.ok)), on);
    for (const cand of sweep) {
      if (considered() >= budget) break;
      const key = keyOf(cand);
      if (seen.has(key)) continue;
      seen.add(key);
      const failed = ev.checks(cand).filter((x) => !x.ok);
      if (failed.length > 0) {
        rejected++;
        if (!ev.rejected.has(key)) ev.rejected.set(key, { weights: { ...cand }, failed });
        log(`tune ${what}: candidate ${considered()}/${budget}: ${key} not admissible (${failed.map((x) => `${x.constraint}: ${x.detail}`).join('; ')})`);
        continue;
      }
      points.push(cand);
      table.push(on.map((i) => ev.goodput(cand, i)));
      const next = minimaxPick(table, maxLoss);
      const secs = ((performance.now() - t0) / 1000).toFixed(0);
      if (next !== pick) {
        pick = next;
        improved = true;
        log(`tune ${what}: candidate ${considered()}/${budget}: new best, worst regret ${pct(worstOf(pick))} (defaults ${pct(worstOf(0))}) with ${keyOf(points[pick])} [${ev.runs} runs, ${secs} s]`);
      } else {
        log(`tune ${what}: candidate ${considered()}/${budget}: worst regret ${pct(worstOf(points.length - 1))}, best still ${pct(worstOf(pick))} [${ev.runs} runs, ${secs} s]`);
      }
    }
    if (!improved) f = Math.sqrt(f);
  }
  return { best: points[pick], candidates: considered() };
}

const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
const rel = (best: number, g: number) => (best > 0 ? round(Math.max(0, (best - g) / best), 4) : 0);

export async function tune(opts: TuneOptions): Promise<TuneReport> {
  const budget = Math.max(1, opts.budget ?? 30);
  const log = opts.log ?? (() => {});
  const slo = opts.slo ?? headlineOf(DEFAULT_SLOS)!;
  const maxLoss = opts.maxLoss ?? Infinity;
  const names = opts.inputs.map((i) => i.name);
  if (names.length === 0) throw new RangeError('no inputs to tune on');
  if (new Set(names).size !== names.length) throw new RangeError(`inputs named twice: ${names.join(', ')}`);
  if (opts.scales.length === 0) throw new RangeError('no rate scales');
  const holdout = opts.holdout;
  if (holdout !== undefined && holdout !== 'all' && !names.includes(holdout)) {
    throw new RangeError(`--holdout ${holdout}: not one of the inputs (${names.join(', ')})`);
  }
  if (holdout !== undefined && names.length < 2) throw new RangeError('holding an input out needs at least two inputs');

  const setup: RunSetup = { inputs: opts.inputs, scales: opts.scales, endpoints: opts.endpoints, profile: opts.profile, pool: opts.pool, seed: opts.seed, slo };
  const jobs = Math.max(1, Math.floor(opts.jobs ?? 1));
  const workers = jobs > 1 ? new WorkerPool(jobs, setup) : undefined;
  try {
    return await searchAll(opts, setup, new Evaluator(setup, workers, [...new Set(opts.constraints ?? [])]), budget, maxLoss, log);
  } finally {
    await workers?.close();
  }
}

async function searchAll(opts: TuneOptions, setup: RunSetup, ev: Evaluator, budget: number, maxLoss: number, log: (l: string) => void): Promise<TuneReport> {
  const slo = setup.slo;
  const names = opts.inputs.map((i) => i.name);
  const holdout = opts.holdout;
  const start: Point = { ...simConfig([endpointName(0)], [], opts.pool).pool.scoring };
  const t0 = performance.now();

  // out of sample: tune on the others, then search the held-out input alone for the best found there
  const heldOut = holdout === undefined ? [] : holdout === 'all' ? names : [holdout];
  const folds: Array<{ input: string; weights: Point; candidates: number }> = [];
  for (const h of heldOut) {
    const others = names.filter((n) => n !== h);
    const s = await search(ev, start, others, budget, maxLoss, `without ${h}`, log, t0);
    folds.push({ input: h, weights: s.best, candidates: s.candidates });
    await search(ev, start, [h], budget, maxLoss, `on ${h} alone`, log, t0);
  }
  // the weights to report: on every input, or on all but a single held-out one
  const tunedOn = holdout === undefined || holdout === 'all' ? names : names.filter((n) => n !== holdout);
  const main: SearchResult =
    holdout !== undefined && holdout !== 'all'
      ? { best: folds[0].weights, candidates: folds[0].candidates }
      : await search(ev, start, tunedOn, budget, maxLoss, `on ${tunedOn.length === 1 ? tunedOn[0] : `${tunedOn.length} inputs`}`, log, t0);

  const figure = (input: string): InputFigures => {
    const d = ev.figures(start, input);
    const t = ev.figures(main.best, input);
    const dg = ev.goodput(start, input);
    const tg = ev.goodput(main.best, input);
    const best = ev.best(input);
    return {
      input,
      tuned_on: tunedOn.includes(input),
      defaults_goodput: round(dg, 3),
      tuned_goodput: round(tg, 3),
      best_goodput: round(best, 3),
      defaults_regret: rel(best, dg),
      tuned_regret: rel(best, tg),
      scales: d.map((x, i) => {
        const { rate_scale, ...defaults } = x;
        const { rate_scale: _s, ...tuned } = t[i];
        return { rate_scale, defaults, tuned };
      }),
    };
  };
  const perInput = names.map(figure);
  const holdoutRows: HoldoutFigures[] = folds.map(({ input, weights }) => {
    const dg = ev.goodput(start, input);
    const tg = ev.goodput(weights, input);
    const best = ev.best(input);
    return {
      input,
      weights: { ...weights },
      defaults_goodput: round(dg, 3),
      tuned_goodput: round(tg, 3),
      best_goodput: round(best, 3),
      change: dg > 0 ? round((tg - dg) / dg, 4) : 0,
      defaults_regret: rel(best, dg),
      tuned_regret: rel(best, tg),
    };
  });
  const onRows = perInput.filter((r) => r.tuned_on);
  const report: TuneReport = {
    objective: {
      slo_ttft_ms: slo.ttftMs,
      slo_itl_ms: slo.itlMs,
      rate_scales: [...opts.scales],
      regret: 'per input: (best goodput found there − goodput) / best, goodput at the SLO averaged over the rate scales; the search minimises the worst case over the inputs it tunes on',
      max_loss: Number.isFinite(maxLoss) ? maxLoss : null,
    },
    inputs: opts.inputs.map((i) => ({ name: i.name, requests: i.requests.length })),
    defaults: { ...start },
    tuned: { ...main.best },
    tuned_on: tunedOn,
    candidates: main.candidates,
    runs: ev.runs,
    worst_regret: {
      defaults: Math.max(0, ...onRows.map((r) => r.defaults_regret)),
      tuned: Math.max(0, ...onRows.map((r) => r.tuned_regret)),
    },
    per_input: perInput,
    holdout: holdoutRows,
    yaml: ['scoring:', ...SCORER_NAMES.map((k) => `  ${k}: ${main.best[k]}`)].join('\n') + '\n',
  };
  const tunedOk = ev.checks(main.best).every((x) => x.ok);
  if (ev.constraints.length > 0) {
    report.constraints = {
      names: [...ev.constraints],
      defaults: ev.checks(start),
      tuned: ev.checks(main.best),
      rejected: [...ev.rejected.values()],
      checked: ev.checked,
    };
  }
  if (holdout === 'all') {
    const changes = holdoutRows.map((r) => r.change);
    const mean = changes.reduce((a, b) => a + b, 0) / changes.length;
    const worst = Math.min(...changes);
    const regret = { defaults: Math.max(...holdoutRows.map((r) => r.defaults_regret)), tuned: Math.max(...holdoutRows.map((r) => r.tuned_regret)) };
    const beats = regret.tuned < regret.defaults - OUT_OF_SAMPLE_MARGIN && mean > OUT_OF_SAMPLE_MARGIN;
    report.out_of_sample = {
      mean_change: round(mean, 4),
      worst_change: worst,
      worst_regret: regret,
      beats_defaults: beats,
      rule: OUT_OF_SAMPLE_RULE,
    };
    const same = keyOf(main.best) === keyOf(start);
    const asked = ev.constraints.length > 0 ? ` and keep ${ev.constraints.join(', ')}` : ' (no constraints were checked)';
    report.ship = same
      ? { ship: false, reason: 'the search kept the defaults: nothing to ship' }
      : !beats
        ? { ship: false, reason: 'the tuned weights do not beat the defaults out of sample: keep the defaults' }
        : !tunedOk
          ? { ship: false, reason: 'the tuned weights break a constraint: keep the defaults' }
          : { ship: true, reason: `the tuned weights beat the defaults out of sample${asked}: ship them` };
  }
  return report;
}

/** The report as text: what each column means, then one row per input, the held-out rows, the weights. */
export function formatTuneReport(r: TuneReport): string {
  const lines: string[] = [];
  const g = (x: number) => x.toFixed(3);
  const p = (x: number) => (x * 100).toFixed(1);
  lines.push(
    `objective: goodput at TTFT ≤ ${r.objective.slo_ttft_ms} ms and mean ITL ≤ ${r.objective.slo_itl_ms} ms (shed and failed requests are misses), ` +
      `mean over rate scales ×${r.objective.rate_scales.join(', ×')}; minimax relative regret over the inputs tuned on` +
      (r.objective.max_loss === null ? '' : `, losing at most ${(r.objective.max_loss * 100).toFixed(1)}% against the defaults on any of them`),
  );
  lines.push(`tuned on ${r.tuned_on.join(', ')}: ${r.candidates} weight sets, ${r.runs} simulation runs in all`);
  lines.push('');
  const head = ['input', 'tuned on', 'defaults good/s', 'tuned good/s', 'best found', 'defaults regret %', 'tuned regret %'];
  const rows = r.per_input.map((x) => [x.input, x.tuned_on ? 'yes' : 'no (held out)', g(x.defaults_goodput), g(x.tuned_goodput), g(x.best_goodput), p(x.defaults_regret), p(x.tuned_regret)]);
  lines.push(...columns(head, rows));
  lines.push(`worst regret over the inputs tuned on: defaults ${p(r.worst_regret.defaults)}%, tuned ${p(r.worst_regret.tuned)}%`);
  if (r.holdout.length > 0) {
    lines.push('', 'out of sample (weights tuned on every other input, run on the held-out one):');
    const hh = ['held out', 'defaults good/s', 'tuned good/s', 'best found', 'change %', 'tuned regret %', 'weights (' + SCORER_NAMES.join(',') + ')'];
    const hr = r.holdout.map((x) => [x.input, g(x.defaults_goodput), g(x.tuned_goodput), g(x.best_goodput), (x.change >= 0 ? '+' : '') + p(x.change), p(x.tuned_regret), SCORER_NAMES.map((k) => x.weights[k]).join(',')]);
    lines.push(...columns(hh, hr));
    if (r.out_of_sample) {
      const o = r.out_of_sample;
      lines.push(
        `leave-one-out: worst held-out regret ${p(o.worst_regret.tuned)}% (defaults ${p(o.worst_regret.defaults)}%), ` +
          `goodput change mean ${(o.mean_change * 100).toFixed(2)}%, worst ${(o.worst_change * 100).toFixed(2)}%: ` +
          (o.beats_defaults ? 'tuning beats the defaults out of sample' : 'tuning does NOT beat the defaults out of sample: keep the defaults') +
          ` (rule: ${o.rule})`,
      );
    }
  }
  if (r.constraints) {
    const c = r.constraints;
    const checks = (xs: ConstraintCheck[]) => xs.map((x) => `${x.constraint} ${x.ok ? 'kept' : 'BROKEN'} (${x.detail})`).join('; ');
    lines.push('', `constraints (${c.names.join(', ')}; src/sim/README.md, "Tuning"): ${c.checked} weight sets checked, ${c.rejected.length} not admissible`);
    lines.push(`  defaults: ${checks(c.defaults)}`);
    lines.push(`  tuned:    ${checks(c.tuned)}`);
    if (c.rejected.length > 0) {
      lines.push(`  rejected (${SCORER_NAMES.join(',')}):`);
      for (const x of c.rejected) lines.push(`    ${SCORER_NAMES.map((k) => x.weights[k]).join(',')}: ${x.failed.map((f) => `${f.constraint}: ${f.detail}`).join('; ')}`);
    }
  }
  if (r.ship) lines.push('', `${r.ship.ship ? 'SHIP' : 'KEEP THE DEFAULTS'}: ${r.ship.reason}`);
  lines.push('', `weights: defaults ${SCORER_NAMES.map((k) => `${k} ${r.defaults[k]}`).join(', ')}`);
  lines.push(`         tuned    ${SCORER_NAMES.map((k) => `${k} ${r.tuned[k]}`).join(', ')}`);
  lines.push('', "paste into the pool's config (fitted to these inputs; see the out-of-sample rows before trusting it elsewhere):", r.yaml);
  lines.push(
    'Columns: good/s = requests per second that completed within both SLO bounds (mean over the rate scales); ' +
      'best found = the most any weight set evaluated in this run reached on that input; regret = (best found − goodput) / best found; ' +
      'change = (tuned − defaults) / defaults.\n',
  );
  return lines.join('\n');
}

function columns(head: string[], rows: string[][]): string[] {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ').trimEnd();
  return [fmt(head), ...rows.map(fmt)];
}
