/**
 * The routing-quality targets (see src/sim/README.md), checked on one result:
 * - contended (round_robin TTFT p99 ≥ 5 × oracle's) on a workload with sharing: scored TTFT p99 ≤ 0.15 ×
 *   round_robin and ≤ 0.5 × least_request; scored TTFT p50 and p99 ≤ 1.2 × oracle; scored ITL p99 ≤ 1.1 ×
 *   least_request;
 * - no-sharing, at any load: scored TTFT p99 and throughput within 5% of least_request.
 * And under overload (issue #17, `checkOverloadTargets`), wherever the oracle sheds at most 25% of the offered
 * requests: scored's goodput at the headline SLO ≥ 0.95 × the oracle's, its prefix-cache hit rate ≥ 0.9 × the
 * oracle's (where the oracle's is at least 1%: there is sharing), its shed share ≤ 1.1 × the oracle's + 0.5
 * points; on no-sharing traffic, at every load, scored's goodput ≥ least_request's.
 */
import { headlineOf } from './slo.js';
import type { RunResult, SimResult } from './types.js';

export interface TargetCheck {
  name: string;
  value: number;
  limit: number;
  pass: boolean;
  /**
   * For limits set by a baseline: whether the oracle itself is within it. When it is not (contention below
   * about 1/0.15 = 6.7 for the round-robin check), no router can be expected to meet it.
   */
  oraclePasses?: boolean;
}

export interface TargetReport {
  /** round_robin p99 / oracle p99 */
  contention: number;
  contended: boolean;
  /** false when the workload is not one the targets speak of at this load (or a policy is missing) */
  applies: boolean;
  checks: TargetCheck[];
}

const le = (name: string, value: number, limit: number): TargetCheck => ({ name, value: r3(value), limit: r3(limit), pass: value <= limit + 1e-9 });
/** at the limit passes: 0.9 × 0.2 is 0.18000000000000002 in floating point */
const ge = (name: string, value: number, limit: number): TargetCheck => ({ name, value: r3(value), limit: r3(limit), pass: value >= limit - 1e-9 });
const r3 = (x: number) => Math.round(x * 1000) / 1000;

export function checkTargets(res: SimResult, noSharing = res.workload.trace === 'no-sharing'): TargetReport {
  const by = new Map<string, RunResult>(res.runs.map((r) => [r.policy, r]));
  const rr = by.get('round_robin'), lr = by.get('least_request'), sc = by.get('scored'), or = by.get('oracle');
  const contention = rr && or && or.ttft_ms.p99 > 0 ? rr.ttft_ms.p99 / or.ttft_ms.p99 : 0;
  const contended = contention >= 5;
  const checks: TargetCheck[] = [];
  if (noSharing) {
    if (!sc || !lr) return { contention, contended, applies: false, checks };
    checks.push(le('scored ttft p99 ≤ 1.05 × least_request', sc.ttft_ms.p99, 1.05 * lr.ttft_ms.p99));
    checks.push({
      name: 'scored throughput ≥ 0.95 × least_request',
      value: sc.throughput_rps,
      limit: r3(0.95 * lr.throughput_rps),
      pass: sc.throughput_rps >= 0.95 * lr.throughput_rps,
    });
    return { contention, contended, applies: true, checks };
  }
  if (!contended || !sc || !lr || !rr || !or) return { contention, contended, applies: false, checks };
  checks.push({ ...le('scored ttft p99 ≤ 0.15 × round_robin', sc.ttft_ms.p99, 0.15 * rr.ttft_ms.p99), oraclePasses: or.ttft_ms.p99 <= 0.15 * rr.ttft_ms.p99 });
  checks.push({ ...le('scored ttft p99 ≤ 0.5 × least_request', sc.ttft_ms.p99, 0.5 * lr.ttft_ms.p99), oraclePasses: or.ttft_ms.p99 <= 0.5 * lr.ttft_ms.p99 });
  checks.push(le('scored ttft p50 ≤ 1.2 × oracle', sc.ttft_ms.p50, 1.2 * or.ttft_ms.p50));
  checks.push(le('scored ttft p99 ≤ 1.2 × oracle', sc.ttft_ms.p99, 1.2 * or.ttft_ms.p99));
  checks.push({ ...le('scored itl p99 ≤ 1.1 × least_request', sc.itl_ms.p99, 1.1 * lr.itl_ms.p99), oraclePasses: or.itl_ms.p99 <= 1.1 * lr.itl_ms.p99 });
  return { contention, contended, applies: true, checks };
}

export function formatTargets(t: TargetReport): string {
  const head = `contention (round_robin p99 / oracle p99): ${t.contention.toFixed(2)}${t.contended ? ' (contended)' : ''}`;
  if (!t.applies) return `${head}; targets do not apply at this load\n`;
  const note = (c: TargetCheck) => (c.oraclePasses === false ? ' (the oracle misses it too)' : '');
  return [head, ...t.checks.map((c) => `  ${c.pass ? 'PASS' : 'MISS'}  ${c.name}: ${c.value} vs ${c.limit}${note(c)}`)].join('\n') + '\n';
}

/** Where the overload targets apply: the oracle sheds at most this share of the offered requests. */
export const OVERLOAD_MAX_ORACLE_SHED = 0.25;

/**
 * The overload targets (issue #17) on one result that has scored and oracle runs (least_request too, for the
 * no-sharing check). `applies` is false where the oracle sheds more than OVERLOAD_MAX_ORACLE_SHED (the
 * no-sharing comparison with least_request is still made there) or a run is missing.
 */
export function checkOverloadTargets(res: SimResult, noSharing = res.workload.trace === 'no-sharing'): TargetReport & { oracleShed: number } {
  const by = new Map<string, RunResult>(res.runs.map((r) => [r.policy, r]));
  const sc = by.get('scored'), or = by.get('oracle'), lr = by.get('least_request');
  const checks: TargetCheck[] = [];
  if (!sc || !or) return { contention: 0, contended: false, applies: false, checks, oracleShed: or?.shed_share ?? NaN };
  const good = (r: RunResult) => headlineOf(r.slo)?.goodput_rps ?? 0;
  const applies = or.shed_share <= OVERLOAD_MAX_ORACLE_SHED;
  if (applies) {
    checks.push(ge('scored goodput ≥ 0.95 × oracle', good(sc), 0.95 * good(or)));
    if (or.prefix_cache_hit_rate >= 0.01) checks.push(ge('scored hit rate ≥ 0.9 × oracle', sc.prefix_cache_hit_rate, 0.9 * or.prefix_cache_hit_rate));
    checks.push(le('scored shed share ≤ 1.1 × oracle + 0.005', sc.shed_share, 1.1 * or.shed_share + 0.005));
  }
  if (noSharing && lr) checks.push(ge('scored goodput ≥ least_request', good(sc), good(lr)));
  return { contention: 0, contended: false, applies, checks, oracleShed: or.shed_share };
}

/** The overload targets, a line each (after the table of `simulate --targets`). */
export function formatOverloadTargets(t: ReturnType<typeof checkOverloadTargets>): string {
  const head = `overload targets (the oracle sheds ${Number.isFinite(t.oracleShed) ? (t.oracleShed * 100).toFixed(1) + '%' : 'n/a'})`;
  if (t.checks.length === 0) return `${head}: do not apply${Number.isFinite(t.oracleShed) ? ` (the oracle sheds more than ${OVERLOAD_MAX_ORACLE_SHED * 100}%)` : ' (needs the scored and oracle runs)'}\n`;
  return [head, ...t.checks.map((c) => `  ${c.pass ? 'PASS' : 'MISS'}  ${c.name}: ${c.value} vs ${c.limit}`)].join('\n') + '\n';
}
