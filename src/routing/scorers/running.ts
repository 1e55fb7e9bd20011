/** running: (fewest running sequences + 1) / (running sequences + 1). */
import type { Scorer } from './scorer.js';

export const runningScorer: Scorer<'running'> = {
  name: 'running',
  defaultWeight: 1,
  appliesTo: null,
  score(t, out) {
    const cands = t.cands;
    let min = Infinity;
    for (const c of cands) if (!c.saturated && c.running < min) min = c.running;
    for (let i = 0; i < cands.length; i++) out[i] = (min + 1) / (cands[i].running + 1);
  },
};
