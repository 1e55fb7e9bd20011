/**
 * load: (fewest in flight + 1) / (in flight + 1), from the gateway's own accounting of what it sent, plus
 * what the other replicas report in flight there when a cluster shares it (EndpointState.remoteInFlight).
 */
import type { Scorer } from './scorer.js';

export const loadScorer: Scorer<'load'> = {
  name: 'load',
  defaultWeight: 2,
  appliesTo: null,
  score(t, w, sum) {
    const n = t.n;
    const best = t.minInFlight + 1;
    const st = t.st;
    for (let i = 0; i < n; i++) sum[i] += w * (best / (st[i].inFlight + st[i].remoteInFlight + 1));
  },
};
