/** prefix: the share of the prompt's prefix blocks the endpoint likely holds in its KV cache. */
import type { Scorer } from './scorer.js';

export const prefixScorer: Scorer<'prefix'> = {
  name: 'prefix',
  defaultWeight: 3,
  appliesTo: (t) => t.totalBlocks > 0,
  score(t, out) {
    const total = t.totalBlocks;
    const cands = t.cands;
    for (let i = 0; i < cands.length; i++) out[i] = total > 0 ? cands[i].matched / total : 0;
  },
};
