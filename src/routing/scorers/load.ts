/** load: (fewest in flight + 1) / (in flight + 1), from the gateway's own accounting of what it sent. */
import type { Scorer } from './scorer.js';

export const loadScorer: Scorer<'load'> = {
  name: 'load',
  defaultWeight: 2,
  appliesTo: null,
  score(t, out) {
    const cands = t.cands;
    let min = Infinity;
    for (const c of cands) if (!c.saturated && c.st.inFlight < min) min = c.st.inFlight;
    for (let i = 0; i < cands.length; i++) out[i] = (min + 1) / (cands[i].st.inFlight + 1);
  },
};
