/**
 * kv_cache: 1 − KV-cache use. An endpoint with stale signals gets the mean of the fresh ones; the scorer is
 * off when no candidate's signals are fresh.
 */
import type { Scorer } from './scorer.js';

export const kvCacheScorer: Scorer<'kv_cache'> = {
  name: 'kv_cache',
  defaultWeight: 2,
  appliesTo: (t) => {
    for (const c of t.cands) if (!c.saturated && c.fresh) return true;
    return false;
  },
  score(t, out) {
    const cands = t.cands;
    let sum = 0;
    let n = 0;
    for (const c of cands) {
      if (c.saturated || !c.fresh) continue;
      sum += 1 - c.kv;
      n++;
    }
    const neutral = n > 0 ? sum / n : 0.5;
    for (let i = 0; i < cands.length; i++) {
      const c = cands[i];
      out[i] = c.fresh ? Math.max(0, Math.min(1, 1 - c.kv)) : neutral;
    }
  },
};
