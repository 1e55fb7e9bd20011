/** round_robin: the candidates in turn (saturated ones included: a baseline stays a baseline). */
import type { Policy } from './policy.js';

export const roundRobin: Policy<'round_robin'> = {
  name: 'round_robin',
  choose(t, ctx) {
    const chosen = ctx.rr % t.n;
    if (!ctx.dryRun) ctx.rr = (ctx.rr + 1) % 1_000_000_007;
    return chosen;
  },
};
