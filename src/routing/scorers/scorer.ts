/**
 * What a scorer is: a named, weighted judgement of each candidate in [0, 1] (higher is better), written
 * column-wise for a whole pick's candidate table, so that a pick makes one call per scorer, not one per
 * candidate, and the loop inside stays monomorphic.
 */
import type { CandidateTable } from '../candidates.js';

export interface Scorer<N extends string = string> {
  /** the key under a pool's `scoring` weights, in explain and in the tuner */
  readonly name: N;
  /** its weight when the config leaves it */
  readonly defaultWeight: number;
  /**
   * null: every pick uses it. Otherwise whether this pick does: when not, its weight counts as 0, and
   * explain lists the scorer only when it counted (applied with a weight above 0).
   */
  readonly appliesTo: ((t: CandidateTable) => boolean) | null;
  /** out[i] = the score of t.cands[i], for every unsaturated candidate (saturated ones are not read) */
  score(t: CandidateTable, out: Float64Array): void;
}
