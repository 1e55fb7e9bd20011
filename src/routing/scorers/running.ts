/** running: (fewest running sequences + 1) / (running sequences + 1). */
import type { Scorer } from './scorer.js';

export const runningScorer: Scorer<'running'> = {
  name: 'running',
  defaultWeight: 1,
  appliesTo: null,
  score(t, w, sum) {
    const n = t.n;
    const best = t.minRunning + 1;
    const running = t.running;
    for (let i = 0; i < n; i++) sum[i] += w * (best / (running[i] + 1));
  },
};
