/** prefix: the share of the prompt's prefix blocks the endpoint likely holds in its KV cache. */
import type { Scorer } from './scorer.js';

export const prefixScorer: Scorer<'prefix'> = {
  name: 'prefix',
  defaultWeight: 3,
  appliesTo: (t) => t.totalBlocks > 0,
  score(t, w, sum) {
    const n = t.n;
    const total = t.totalBlocks;
    const matched = t.matched;
    for (let i = 0; i < n; i++) sum[i] += w * (total > 0 ? matched[i] / total : 0);
  },
};
