/**
 * The tuner's runs, in this thread or spread over worker threads (`--tune-jobs N`). A run is one `scored`
 * simulation of one input at one rate scale with one weight set, or one constraint check of a weight set
 * (tune-constraints.ts): deterministic, so where it runs changes nothing in the result, only how long the
 * search takes.
 */
import { Worker } from 'node:worker_threads';
import type { EngineProfile } from '../engine/index.js';
import type { ScoringWeights } from '../routing/index.js';
import { mergeSettings, type PoolSettings } from './config.js';
import { profileFor, runPolicy, scaleArrivals } from './simulate.js';
import type { SloSpec } from './slo.js';
import { checkConstraint, type ConstraintCheck, type TuneConstraint } from './tune-constraints.js';
import type { SimRequest } from './types.js';

/** One run's figures at the objective's SLO. */
export interface ScaleFigures {
  goodput_rps: number;
  attainment: number;
  shed_share: number;
}

/** Everything a run needs besides the weights, input and scale (sent once to each worker). */
export interface RunSetup {
  inputs: ReadonlyArray<{ name: string; requests: readonly SimRequest[] }>;
  scales: readonly number[];
  endpoints: number;
  profile: Partial<EngineProfile>;
  pool: PoolSettings;
  seed: number;
  slo: SloSpec;
}

export interface RunTask {
  weights: ScoringWeights;
  input: string;
  scale: number;
}

export interface CheckTask {
  weights: ScoringWeights;
  constraint: TuneConstraint;
}

/** What a worker is sent: a run or a check. */
export type PoolTask = { run: RunTask } | { check: CheckTask };

type Workload = { requests: readonly SimRequest[]; profile: Partial<EngineProfile> };

/** Runs tasks of one setup in this thread. */
export class LocalRunner {
  private readonly workloads = new Map<string, Workload>();
  constructor(private readonly setup: RunSetup) {
    for (const input of setup.inputs) {
      for (const scale of setup.scales) {
        const requests = scale === 1 ? input.requests : scaleArrivals(input.requests, scale);
        this.workloads.set(`${input.name}|${scale}`, { requests, profile: profileFor(requests, setup.profile) });
      }
    }
  }

  run(t: RunTask): ScaleFigures {
    const w = this.workloads.get(`${t.input}|${t.scale}`);
    if (!w) throw new Error(`no input ${t.input} at scale ${t.scale}`);
    const run = runPolicy('scored', w.requests, {
      endpoints: this.setup.endpoints,
      profile: w.profile,
      pool: mergeSettings(this.setup.pool, { scoring: { ...t.weights } }),
      seed: this.setup.seed,
      slos: [this.setup.slo],
    });
    const s = run.slo[0]; // the one objective passed
    return { goodput_rps: s.goodput_rps, attainment: s.attainment, shed_share: run.shed_share };
  }

  check(t: CheckTask): ConstraintCheck {
    return checkConstraint(t.constraint, t.weights, { pool: this.setup.pool, profile: this.setup.profile });
  }

  do(t: PoolTask): ScaleFigures | ConstraintCheck {
    return 'run' in t ? this.run(t.run) : this.check(t.check);
  }
}

type Reply = { id: number; result?: ScaleFigures | ConstraintCheck; error?: string };

/** Runs tasks on N worker threads (tune-worker.ts), each with its own LocalRunner of the same setup. */
export class WorkerPool {
  private readonly idle: Worker[] = [];
  private readonly queue: Array<{ id: number; task: PoolTask }> = [];
  private readonly pending = new Map<number, { resolve: (r: ScaleFigures | ConstraintCheck) => void; reject: (e: Error) => void }>();
  private readonly workers: Worker[] = [];
  private next = 0;
  private failed: Error | undefined;

  constructor(n: number, setup: RunSetup) {
    const url = new URL('./tune-worker.js', import.meta.url);
    for (let i = 0; i < n; i++) {
      const w = new Worker(url, { workerData: setup });
      w.on('message', (m: Reply) => {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        if (p) {
          if (m.error !== undefined) p.reject(new Error(m.error));
          else p.resolve(m.result!);
        }
        this.idle.push(w);
        this.pump();
      });
      w.on('error', (e) => this.fail(e));
      w.on('exit', (code) => {
        if (code !== 0) this.fail(new Error(`a tune worker exited with code ${code}`));
      });
      this.workers.push(w);
      this.idle.push(w);
    }
  }

  run(task: RunTask): Promise<ScaleFigures> {
    return this.submit({ run: task }) as Promise<ScaleFigures>;
  }

  check(task: CheckTask): Promise<ConstraintCheck> {
    return this.submit({ check: task }) as Promise<ConstraintCheck>;
  }

  private submit(task: PoolTask): Promise<ScaleFigures | ConstraintCheck> {
    if (this.failed) return Promise.reject(this.failed);
    const id = this.next++;
    const p = new Promise<ScaleFigures | ConstraintCheck>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.queue.push({ id, task });
    this.pump();
    return p;
  }

  private pump(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const w = this.idle.pop()!;
      const t = this.queue.shift()!;
      w.postMessage(t);
    }
  }

  private fail(e: Error): void {
    if (this.failed) return;
    this.failed = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.queue.length = 0;
  }

  async close(): Promise<void> {
    this.failed ??= new Error('the tune workers were closed');
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
