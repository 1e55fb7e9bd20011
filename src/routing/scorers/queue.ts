/**
 * queue: (least work ahead + c0) / (work ahead + c0), the work being queued prefill in prompt tokens (not a
 * count of requests: three short prompts queue less than one 30k-token one); c0 = Tuning.idleCostTokens.
 */
import type { Scorer } from './scorer.js';

export const queueScorer: Scorer<'queue'> = {
  name: 'queue',
  defaultWeight: 2,
  appliesTo: null,
  score(t, w, sum) {
    const n = t.n;
    const c0 = t.tuning.idleCostTokens;
    const best = t.minAhead + c0;
    const ahead = t.ahead;
    for (let i = 0; i < n; i++) sum[i] += w * (best / (ahead[i] + c0));
  },
};
