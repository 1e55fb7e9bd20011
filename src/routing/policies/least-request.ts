/**
 * least_request: the fewest requests of ours in flight, then the fewest waiting + running in fresh metrics,
 * then at random (saturated candidates included: a baseline stays a baseline).
 */
import type { Policy } from './policy.js';

export const leastRequest: Policy<'least_request'> = {
  name: 'least_request',
  choose(t, ctx) {
    const ties = ctx.ties;
    ties.length = 0;
    let bestF = Infinity;
    let bestM = Infinity;
    for (let i = 0; i < t.n; i++) {
      const st = t.st[i];
      const f = st.inFlight;
      const sig = st.sig;
      const m = t.fresh[i] === 1 ? sig!.waiting + sig!.running : 0;
      if (f < bestF || (f === bestF && m < bestM)) {
        ties.length = 0;
        ties.push(i);
        bestF = f;
        bestM = m;
      } else if (f === bestF && m === bestM) ties.push(i);
    }
    return ctx.pickTie();
  },
};
