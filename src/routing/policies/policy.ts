/**
 * What a policy is: given a pick's candidate table (at least one candidate unsaturated), choose one. A
 * policy object is shared by every pool; what a pool keeps between picks (the round-robin position, the
 * randomness) and the scratch a pick reuses live in the pool's PolicyContext.
 */
import type { Candidate, CandidateTable } from '../candidates.js';
import { SCORERS, type ScoringWeights } from '../scorers/index.js';

export interface Policy<N extends string = string> {
  readonly name: N;
  choose(t: CandidateTable, ctx: PolicyContext): Candidate;
}

/** One pool's policy state and per-pick scratch (pick is synchronous and never re-entered). */
export class PolicyContext {
  /** round_robin's position */
  rr = 0;
  /** this pick is a dry run: decide, change nothing (round_robin does not advance) */
  dryRun = false;
  /** the pool's scorer weights */
  weights: ScoringWeights;
  /** candidates tied for best (reused) */
  readonly ties: Candidate[] = [];
  /**
   * Set by the scored policy when it has filled the columns below for this pick (explain reads them);
   * cleared before each pick.
   */
  scored = false;
  /** per scorer (SCORERS order): whether it applied to this pick, its weight then, its score by candidate */
  readonly applied = new Uint8Array(SCORERS.length);
  readonly appliedWeight = new Float64Array(SCORERS.length);
  scores: Float64Array[] = SCORERS.map(() => new Float64Array(64));
  /** by candidate: the weighted mean of the scores, the load factor, and their product */
  weighted = new Float64Array(64);
  loadFactor = new Float64Array(64);
  total = new Float64Array(64);

  constructor(
    readonly random: () => number,
    weights: ScoringWeights,
  ) {
    this.weights = weights;
  }

  /** Room for n candidates in the per-candidate columns. */
  reserve(n: number): void {
    if (n <= this.total.length) return;
    let size = this.total.length;
    while (size < n) size *= 2;
    this.scores = SCORERS.map(() => new Float64Array(size));
    this.weighted = new Float64Array(size);
    this.loadFactor = new Float64Array(size);
    this.total = new Float64Array(size);
  }

  /** One of `ties` at random (the only one without drawing). */
  pickTie(): Candidate {
    const ties = this.ties;
    return ties.length === 1 ? ties[0] : ties[Math.min(ties.length - 1, Math.floor(this.random() * ties.length))];
  }
}
