/**
 * kv_cache: 1 − KV-cache use. An endpoint with stale signals gets the mean of the fresh ones; the scorer is
 * off when no candidate's signals are fresh.
 */
import type { Scorer } from './scorer.js';

export const kvCacheScorer: Scorer<'kv_cache'> = {
  name: 'kv_cache',
  defaultWeight: 2,
  appliesTo: (t) => t.freshCount > 0,
  score(t, w, sum) {
    const n = t.n;
    const neutral = t.freshCount > 0 ? t.freshKvFree / t.freshCount : 0.5;
    const fresh = t.fresh;
    const kv = t.kv;
    for (let i = 0; i < n; i++) {
      const free = 1 - kv[i]; // clamped to [0, 1]; NaN stays NaN, as with Math.max/min
      sum[i] += w * (fresh[i] === 1 ? (free > 1 ? 1 : free < 0 ? 0 : free) : neutral);
    }
  },
};
