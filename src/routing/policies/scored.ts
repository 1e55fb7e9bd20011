/**
 * scored: each scorer gives [0,1]; `weighted` is their weighted mean (scorers that do not apply to the pick
 * weigh 0). The number maximised is weighted × loadFactor, loadFactor = (minCost + c0) / (cost + c0), where
 * cost estimates the prefill work ahead of this request on that endpoint, its own uncached tokens included
 * (see candidates.ts), and c0 = Tuning.idleCostTokens. So prefix affinity (worth at most the prefix
 * weight's share of `weighted`) can only win while the matched endpoint's estimated TTFT stays within
 * 1/weighted-ratio of the cheapest one: load wins beyond that. Saturated candidates are skipped; ties
 * (within 1e-12) are broken at random.
 */
import { SCORERS } from '../scorers/index.js';
import type { Policy } from './policy.js';

export const scored: Policy<'scored'> = {
  name: 'scored',
  choose(t, ctx) {
    const cands = t.cands;
    const n = cands.length;
    ctx.reserve(n);
    const { applied, appliedWeight, scores, weighted, loadFactor, total } = ctx;
    // the scorers, column by column; the sum of the weights in SCORERS order
    let wSum = 0;
    for (let k = 0; k < SCORERS.length; k++) {
      const s = SCORERS[k];
      const on = s.appliesTo === null || s.appliesTo(t);
      const w = on ? ctx.weights[s.name] : 0;
      applied[k] = on ? 1 : 0;
      appliedWeight[k] = w;
      wSum += w;
      if (on) s.score(t, scores[k]);
    }
    let minCost = Infinity;
    for (const c of cands) if (!c.saturated && c.cost < minCost) minCost = c.cost;
    const c0 = t.tuning.idleCostTokens;
    let best = -Infinity;
    const ties = ctx.ties;
    ties.length = 0;
    for (let i = 0; i < n; i++) {
      const c = cands[i];
      if (c.saturated) continue;
      // Σ wᵢsᵢ left to right in SCORERS order (a scorer that does not apply adds exactly 0: skipped)
      let sum = 0;
      for (let k = 0; k < applied.length; k++) if (applied[k] === 1) sum += appliedWeight[k] * scores[k][i];
      const wt = wSum > 0 ? sum / wSum : 1;
      const lf = (minCost + c0) / (c.cost + c0);
      const tot = wt * lf;
      weighted[i] = wt;
      loadFactor[i] = lf;
      total[i] = tot;
      if (tot > best + 1e-12) {
        best = tot;
        ties.length = 0;
        ties.push(c);
      } else if (tot >= best - 1e-12) ties.push(c);
    }
    ctx.scored = true;
    return ctx.pickTie();
  },
};
