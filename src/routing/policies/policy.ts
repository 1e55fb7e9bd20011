/**
 * What a policy is: given a pick's candidate table (at least one candidate unsaturated), choose one. A
 * policy object is shared by every pool; what a pool keeps between picks (the round-robin position, the
 * randomness) and the scratch a pick reuses live in the pool's PolicyContext.
 */
import type { CandidateTable } from '../candidates.js';
import { SCORERS, type ScoringWeights } from '../scorers/index.js';

export interface Policy<N extends string = string> {
  readonly name: N;
  /** the chosen row of t */
  choose(t: CandidateTable, ctx: PolicyContext): number;
}

/** One pool's policy state and per-pick scratch (pick is synchronous and never re-entered). */
export class PolicyContext {
  /** round_robin's position */
  rr = 0;
  /** this pick is a dry run: decide, change nothing (round_robin does not advance) */
  dryRun = false;
  /** the pool's scorer weights, in SCORERS order */
  readonly weights = new Float64Array(SCORERS.length);
  /** rows tied for best (reused) */
  readonly ties: number[] = [];
  /**
   * Set by the scored policy when it has filled wSum and sum below for this pick (explain reads them);
   * cleared before each pick.
   */
  scored = false;
  /** per scorer (SCORERS order): whether it applied to this pick, and its weight in this pick */
  readonly applied = new Uint8Array(SCORERS.length);
  readonly appliedWeight = new Float64Array(SCORERS.length);
  /** Σ of the applied weights */
  wSum = 0;
  /** by row: Σ wᵢsᵢ */
  sum = new Float64Array(64);

  constructor(
    readonly random: () => number,
    weights: ScoringWeights,
  ) {
    this.setWeights(weights);
  }

  setWeights(weights: ScoringWeights): void {
    SCORERS.forEach((s, k) => (this.weights[k] = weights[s.name]));
  }

  /** Room for n rows in the per-row column. */
  reserve(n: number): void {
    if (n <= this.sum.length) return;
    let size = this.sum.length;
    while (size < n) size *= 2;
    this.sum = new Float64Array(size);
  }

  /** One of `ties` at random (the only one without drawing). */
  pickTie(): number {
    const ties = this.ties;
    return ties.length === 1 ? ties[0] : ties[Math.min(ties.length - 1, Math.floor(this.random() * ties.length))];
  }
}
