/**
 * The tuner's objective, pure: given the goodput of several candidate weight sets on several inputs (traces
 * or generators), which candidate has the smallest worst-case regret.
 *
 * Regret of candidate c on input i = (best goodput any candidate reached on i − c's goodput on i) / that
 * best: relative, so that an input served at 20 req/s does not outweigh one served at 3 req/s. The pick
 * minimises the worst regret over the inputs, then the mean regret, then takes the earliest (candidate 0,
 * the defaults, wins every tie), so its worst regret is never above the defaults'. It may trade a little on
 * one input for a lot on another; `maxLoss` bounds that: a candidate more than that share below the
 * defaults' goodput on any input is not admissible (0: never worse than the defaults anywhere).
 */

export interface Regrets {
  /** per input: the highest goodput of any candidate */
  best: number[];
  /** per candidate, per input: relative regret in [0, 1] (0 where the best is 0) */
  regret: number[][];
  /** per candidate: the largest of its regrets */
  worst: number[];
  /** per candidate: the mean of its regrets */
  mean: number[];
}

/** goodput[c][i]: candidate c's goodput on input i (any unit, ≥ 0; the same unit down a column). */
export function regrets(goodput: readonly (readonly number[])[]): Regrets {
  const inputs = goodput[0]?.length ?? 0;
  const best = Array.from({ length: inputs }, (_, i) => Math.max(0, ...goodput.map((row) => row[i])));
  const regret = goodput.map((row) => row.map((g, i) => (best[i] > 0 ? Math.max(0, (best[i] - g) / best[i]) : 0)));
  const worst = regret.map((r) => (r.length ? Math.max(...r) : 0));
  const mean = regret.map((r) => (r.length ? r.reduce((a, b) => a + b, 0) / r.length : 0));
  return { best, regret, worst, mean };
}

/**
 * Candidate c is admissible when goodput[c][i] ≥ (1 − maxLoss) × goodput[0][i] for every input i
 * (candidate 0 always is; the default maxLoss, Infinity, admits every candidate).
 */
export function admissible(goodput: readonly (readonly number[])[], maxLoss = Infinity): boolean[] {
  const ref = goodput[0] ?? [];
  return goodput.map((row, c) => c === 0 || row.every((g, i) => g >= (1 - maxLoss) * ref[i]));
}

/** The index of the minimax-regret candidate among the admissible ones (see the module comment). */
export function minimaxPick(goodput: readonly (readonly number[])[], maxLoss = Infinity): number {
  if (goodput.length === 0) throw new RangeError('no candidates');
  const { worst, mean } = regrets(goodput);
  const ok = admissible(goodput, maxLoss);
  let pick = 0;
  for (let c = 1; c < goodput.length; c++) {
    if (!ok[c]) continue;
    if (worst[c] < worst[pick] || (worst[c] === worst[pick] && mean[c] < mean[pick])) pick = c;
  }
  return pick;
}
