/**
 * A pick, explained (PickOptions.explain; the gateway logs it at debug level): per candidate each scorer's
 * value, the weighted mean, cost, load factor and total when the scored policy decided (else the prefix
 * match and cost only); the endpoints filtered out and why. Allocates: off the hot path.
 */
import type { Candidate, CandidateTable } from './candidates.js';
import type { Filtered } from './filters.js';
import type { PolicyContext, PolicyName } from './policies/index.js';
import { SCORERS } from './scorers/index.js';
import type { CandidateExplain, PickExplain } from './types.js';

export function explainPick(
  policy: PolicyName,
  pool: string,
  t: CandidateTable,
  filtered: Filtered,
  ctx: PolicyContext | null,
): PickExplain {
  const totalBlocks = t.totalBlocks;
  const out: PickExplain = { policy, pool, totalBlocks, candidates: [], filtered };
  t.cands.forEach((c, i) => {
    if (ctx === null || !ctx.scored) {
      const scores = { prefix: totalBlocks > 0 ? c.matched / totalBlocks : 0 };
      out.candidates.push(row(c, scores, 0, 0, 0));
      return;
    }
    if (c.saturated) return;
    // a scorer that applies to some picks only is listed when it counted
    const scores: Record<string, number> = {};
    SCORERS.forEach((s, k) => {
      if (s.appliesTo === null || (ctx.applied[k] === 1 && ctx.appliedWeight[k] > 0)) scores[s.name] = ctx.scores[k][i];
    });
    out.candidates.push(row(c, scores, ctx.weighted[i], ctx.loadFactor[i], ctx.total[i]));
  });
  for (const c of t.cands) if (c.saturated) filtered.push({ endpoint: c.st.name, why: 'saturated' });
  return out;
}

function row(c: Candidate, scores: Record<string, number>, weighted: number, loadFactor: number, total: number): CandidateExplain {
  return { endpoint: c.st.name, scores, weighted, cost: c.cost, loadFactor, total, matchedBlocks: c.matched, stale: !c.fresh };
}
