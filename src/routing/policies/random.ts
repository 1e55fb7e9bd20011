/** random: any candidate, uniformly (saturated ones included: a baseline stays a baseline). */
import type { Policy } from './policy.js';

export const randomPolicy: Policy<'random'> = {
  name: 'random',
  choose(t, ctx) {
    const cands = t.cands;
    return cands[Math.min(cands.length - 1, Math.floor(ctx.random() * cands.length))];
  },
};
