/**
 * scored: each scorer gives [0,1]; `weighted` is their weighted mean (scorers that do not apply to the pick
 * weigh 0). The number maximised is weighted × loadFactor, loadFactor = (least credited + c0) / (credited +
 * c0). `credited` is the row's cost (the prefill work ahead of this request on that endpoint, its own uncached
 * tokens included: see candidates.ts) less Tuning.cacheCredit × the prompt tokens the endpoint's cache
 * saves, at least 0, while every candidate has work ahead (else the cost); c0 = Tuning.idleCostTokens. The credit is there because a cache hit is prefill work that
 * no later request waits behind: under load it is capacity, and without it affinity gave way exactly when
 * it mattered most (issue #17). Beyond it, prefix affinity (worth at most the prefix weight's share of
 * `weighted`) wins only while the matched endpoint's credited cost stays within 1/weighted-ratio of the
 * least one: load wins past that. Saturated candidates are skipped; ties (within 1e-12) are broken at random.
 */
import { SCORERS } from '../scorers/index.js';
import type { Policy } from './policy.js';

export const scored: Policy<'scored'> = {
  name: 'scored',
  choose(t, ctx) {
    const n = t.n;
    ctx.reserve(n);
    const { applied, appliedWeight, sum } = ctx;
    // Σ wᵢsᵢ per row, scorer by scorer in SCORERS order: the same left-to-right sum as one expression (a
    // scorer that does not apply adds exactly 0: skipped)
    sum.fill(0, 0, n);
    let wSum = 0;
    for (let k = 0; k < SCORERS.length; k++) {
      const s = SCORERS[k];
      const on = s.appliesTo === null || s.appliesTo(t);
      const w = on ? ctx.weights[k] : 0;
      applied[k] = on ? 1 : 0;
      appliedWeight[k] = w;
      wSum += w;
      if (on) s.score(t, w, sum);
    }
    ctx.wSum = wSum;
    const { saturated, credited } = t;
    const c0 = t.tuning.idleCostTokens;
    const least = t.minCredited + c0;
    let best = -Infinity;
    const ties = ctx.ties;
    ties.length = 0;
    for (let i = 0; i < n; i++) {
      if (saturated[i] === 1) continue;
      const total = weightedMean(sum[i], wSum) * loadFactor(least, credited[i], c0);
      if (total > best + 1e-12) {
        best = total;
        ties.length = 0;
        ties.push(i);
      } else if (total >= best - 1e-12) ties.push(i);
    }
    ctx.scored = true;
    return ctx.pickTie();
  },
};

/** Σ wᵢsᵢ / Σ wᵢ (1 when every weight is 0). */
export function weightedMean(sum: number, wSum: number): number {
  return wSum > 0 ? sum / wSum : 1;
}

/** (least cost + c0) / (cost + c0), given least = the least cost + c0. */
export function loadFactor(least: number, cost: number, c0: number): number {
  return least / (cost + c0);
}
