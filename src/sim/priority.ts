/**
 * Priority classes in simulated traffic (flow control): a mix that gives each request a class by a seeded
 * draw of its own (the workload's arrivals, sizes and prompts stay exactly those without a mix), and the
 * figures per class of a run. The classes are the gateway's (src/routing/wait-queue.ts).
 */
import { PRIORITY_CLASSES, type PriorityClass } from '../routing/index.js';
import { Rng, hash2 } from './rng.js';
import { round, summarize } from './stats.js';
import type { SimRequest, Summary } from './types.js';

export type PriorityMix = Readonly<Record<PriorityClass, number>>;

/** `critical=0.2,standard=0.5,sheddable=0.3` → shares (normalised to 1; a class left out has none). */
export function parsePriorityMix(text: string): PriorityMix {
  const mix: Record<PriorityClass, number> = { critical: 0, standard: 0, sheddable: 0 };
  for (const part of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([a-z]+)=(\d+(?:\.\d+)?)$/.exec(part);
    if (!m || !(PRIORITY_CLASSES as readonly string[]).includes(m[1])) {
      throw new Error(`--priority-mix takes CLASS=SHARE pairs of ${PRIORITY_CLASSES.join(', ')}, e.g. critical=0.2,standard=0.5,sheddable=0.3 (not "${part}")`);
    }
    mix[m[1] as PriorityClass] = Number(m[2]);
  }
  const sum = mix.critical + mix.standard + mix.sheddable;
  if (!(sum > 0)) throw new Error('--priority-mix needs a share above 0');
  return { critical: mix.critical / sum, standard: mix.standard / sum, sheddable: mix.sheddable / sum };
}

/** The requests (copies) with a class each, drawn from `mix` with a stream seeded apart from the workload's. */
export function withPriorities(reqs: readonly SimRequest[], mix: PriorityMix, seed: number): SimRequest[] {
  const rng = new Rng(hash2(seed, 0x9710));
  return reqs.map((r) => {
    const x = rng.float();
    const priority: PriorityClass = x < mix.critical ? 'critical' : x < mix.critical + mix.standard ? 'standard' : 'sheddable';
    return { ...r, priority };
  });
}

/** One class's figures in a run: TTFT over its completed requests (from arrival: queueing included). */
export interface ClassFigures {
  requests: number;
  completed: number;
  rejected: number;
  errors: number;
  ttft_ms: Summary;
  /** requests that waited in the gateway's queue, and their wait (ms) */
  queued: number;
  queue_wait_ms: Summary;
}

export function classFigures(
  requests: readonly SimRequest[],
  doneTtftOf: Float64Array,
  fateOf: Uint8Array,
  queueWaitOf: Float64Array,
): Record<PriorityClass, ClassFigures> | undefined {
  if (!requests.some((r) => r.priority !== undefined)) return undefined;
  const out = {} as Record<PriorityClass, ClassFigures>;
  for (const p of PRIORITY_CLASSES) {
    const ttft: number[] = [];
    const waits: number[] = [];
    let n = 0;
    let rejected = 0;
    let errors = 0;
    requests.forEach((r, i) => {
      if ((r.priority ?? 'standard') !== p) return;
      n++;
      if (!Number.isNaN(doneTtftOf[i])) ttft.push(doneTtftOf[i]);
      if (fateOf[i] === FATE_REJECTED) rejected++;
      else if (fateOf[i] === FATE_ERROR) errors++;
      if (!Number.isNaN(queueWaitOf[i])) waits.push(queueWaitOf[i]);
    });
    out[p] = { requests: n, completed: ttft.length, rejected, errors, ttft_ms: summarize(ttft), queued: waits.length, queue_wait_ms: summarize(waits) };
  }
  return out;
}

export const FATE_NONE = 0;
export const FATE_REJECTED = 1;
export const FATE_ERROR = 2;

/** The per-class lines `simulate` prints under its table. */
export function formatClasses(runs: ReadonlyArray<{ policy: string; per_priority?: Record<PriorityClass, ClassFigures> }>): string {
  const rows = runs.filter((r) => r.per_priority);
  if (rows.length === 0) return '';
  let s = 'per class: policy class requests done rejected queued ttft-p50 ttft-p99 wait-p99 (ms)\n';
  for (const r of rows) {
    for (const p of PRIORITY_CLASSES) {
      const c = r.per_priority![p];
      if (c.requests === 0) continue;
      s += `  ${r.policy} ${p} ${c.requests} ${c.completed} ${c.rejected} ${c.queued} ${round(c.ttft_ms.p50, 1)} ${round(c.ttft_ms.p99, 1)} ${round(c.queue_wait_ms.p99, 1)}\n`;
    }
  }
  return s;
}
