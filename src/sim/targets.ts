/**
 * The routing-quality targets (see src/sim/README.md), checked on one result:
 * - contended (round_robin TTFT p99 ≥ 5 × oracle's) on a workload with sharing: scored TTFT p99 ≤ 0.15 ×
 *   round_robin and ≤ 0.5 × least_request; scored TTFT p50 and p99 ≤ 1.2 × oracle; scored ITL p99 ≤ 1.1 ×
 *   least_request;
 * - no-sharing, at any load: scored TTFT p99 and throughput within 5% of least_request.
 */
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

const le = (name: string, value: number, limit: number): TargetCheck => ({ name, value: r3(value), limit: r3(limit), pass: value <= limit });
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
