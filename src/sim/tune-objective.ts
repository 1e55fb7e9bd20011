/**
 * The tuner's objective, pure: given the goodput of several candidate weight sets on several inputs (traces
 * or generators), which candidate has the smallest worst-case regret.
 *
 * Regret of candidate c on input i = (best goodput any candidate reached on i − c's goodput on i) / that
 * best: relative, so that an input served at 20 req/s does not outweigh one served at 3 req/s. A candidate
 * is admissible when it is at least as good as the reference (candidate 0, the defaults) on every input:
 * the search never trades one input away for another, so the weights it returns are never worse than the
 * defaults on the inputs it saw. Among admissible candidates the pick minimises the worst regret, then the
 * mean regret, then takes the earliest (the defaults win every tie).
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

/** Candidate c is admissible when goodput[c][i] ≥ goodput[0][i] for every input i (candidate 0 always is). */
export function admissible(goodput: readonly (readonly number[])[]): boolean[] {
  const ref = goodput[0] ?? [];
  return goodput.map((row) => row.every((g, i) => g >= ref[i]));
}

/** The index of the minimax-regret candidate among the admissible ones (see the module comment). */
export function minimaxPick(goodput: readonly (readonly number[])[]): number {
  if (goodput.length === 0) throw new RangeError('no candidates');
  const { worst, mean } = regrets(goodput);
  const ok = admissible(goodput);
  let pick = 0;
  for (let c = 1; c < goodput.length; c++) {
    if (!ok[c]) continue;
    if (worst[c] < worst[pick] || (worst[c] === worst[pick] && mean[c] < mean[pick])) pick = c;
  }
  return pick;
}
