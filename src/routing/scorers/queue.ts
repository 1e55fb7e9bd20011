/**
 * queue: (least work ahead + c0) / (work ahead + c0), the work being queued prefill in prompt tokens (not a
 * count of requests: three short prompts queue less than one 30k-token one); c0 = Tuning.idleCostTokens.
 */
import type { Scorer } from './scorer.js';

export const queueScorer: Scorer<'queue'> = {
  name: 'queue',
  defaultWeight: 2,
  appliesTo: null,
  score(t, out) {
    const cands = t.cands;
    const c0 = t.tuning.idleCostTokens;
    let min = Infinity;
    for (const c of cands) if (!c.saturated && c.ahead < min) min = c.ahead;
    for (let i = 0; i < cands.length; i++) out[i] = (min + c0) / (cands[i].ahead + c0);
  },
};
