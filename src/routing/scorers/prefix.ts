/** prefix: the share of the prompt's prefix blocks the endpoint likely holds in its KV cache. */
import type { Scorer } from './scorer.js';

export const prefixScorer: Scorer<'prefix'> = {
  name: 'prefix',
  defaultWeight: 3,
  appliesTo: (t) => t.totalBlocks > 0,
  score(t, w, sum) {
    const n = t.n;
    const total = t.totalBlocks;
    if (total <= 0) return; // every score 0: adds nothing (and the scorer does not apply)
    const matched = t.matched;
    for (let i = 0; i < n; i++) sum[i] += w * (matched[i] / total);
  },
};
