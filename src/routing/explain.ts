/**
 * A pick, explained (PickOptions.explain; the gateway logs it at debug level): per candidate each scorer's
 * value, the weighted mean, cost, load factor and total when the scored policy decided (else the prefix
 * match and cost only); the endpoints filtered out and why. Allocates: off the hot path.
 */
import type { CandidateTable } from './candidates.js';
import type { Filtered } from './filters.js';
import type { PolicyContext, PolicyName } from './policies/index.js';
import { loadFactor, weightedMean } from './policies/scored.js';
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
  const scored = ctx !== null && ctx.scored;
  // each listed scorer's own values (a scorer that applies to some picks only is listed when it counted)
  const listed: Array<{ name: string; values: Float64Array }> = [];
  if (scored) {
    SCORERS.forEach((s, k) => {
      if (s.appliesTo !== null && !(ctx.applied[k] === 1 && ctx.appliedWeight[k] > 0)) return;
      const values = new Float64Array(t.n);
      s.score(t, 1, values);
      listed.push({ name: s.name, values });
    });
  }
  for (let i = 0; i < t.n; i++) {
    if (!scored) {
      out.candidates.push(row(t, i, { prefix: totalBlocks > 0 ? t.matched[i] / totalBlocks : 0 }, 0, 0, 0));
      continue;
    }
    if (t.saturated[i] === 1) continue;
    const scores: Record<string, number> = {};
    for (const l of listed) scores[l.name] = l.values[i];
    const weighted = weightedMean(ctx.sum[i], ctx.wSum);
    const lf = loadFactor(t.minCredited + t.tuning.idleCostTokens, t.credited[i], t.tuning.idleCostTokens);
    out.candidates.push(row(t, i, scores, weighted, lf, weighted * lf));
  }
  for (let i = 0; i < t.n; i++) if (t.saturated[i] === 1) filtered.push({ endpoint: t.st[i].name, why: 'saturated' });
  return out;
}

function row(t: CandidateTable, i: number, scores: Record<string, number>, weighted: number, loadFactor: number, total: number): CandidateExplain {
  return { endpoint: t.st[i].name, scores, weighted, cost: t.cost[i], loadFactor, total, matchedBlocks: t.matched[i], stale: t.fresh[i] === 0 };
}
