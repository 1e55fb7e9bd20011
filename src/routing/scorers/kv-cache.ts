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
    for (let i = 0; i < n; i++) sum[i] += w * (fresh[i] === 1 ? Math.max(0, Math.min(1, 1 - kv[i])) : neutral);
  },
};
