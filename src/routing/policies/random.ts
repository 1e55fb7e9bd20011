/** random: any candidate, uniformly (saturated ones included: a baseline stays a baseline). */
import type { Policy } from './policy.js';

export const randomPolicy: Policy<'random'> = {
  name: 'random',
  choose(t, ctx) {
    return Math.min(t.n - 1, Math.floor(ctx.random() * t.n));
  },
};
