/**
 * What a scorer is: a named, weighted judgement of each candidate in [0, 1] (higher is better), applied
 * column-wise to a whole pick's candidate table, so that a pick makes one call per scorer, not one per
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
  /**
   * For every row i < t.n: sum[i] += w × the row's score. The scored policy builds its weighted sum this
   * way, one pass per scorer; explain reads a scorer's own values with w = 1 into a zeroed column. Rows
   * that are saturated are not read afterwards.
   */
  score(t: CandidateTable, w: number, sum: Float64Array): void;
}
