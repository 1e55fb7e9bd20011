/**
 * The scorer registry: the one list of scorers. The config schema's `scoring` keys and defaults, the
 * simulator's tuner and explain all take the names from here. Adding a scorer: one file beside these and
 * one line in SCORERS.
 *
 * The order is the order of the weighted sum (Σ wᵢsᵢ, left to right), which floating point makes part of
 * every decision: append new scorers, do not reorder.
 */
import { kvCacheScorer } from './kv-cache.js';
import { loadScorer } from './load.js';
import { loraScorer } from './lora.js';
import { prefixScorer } from './prefix.js';
import { queueScorer } from './queue.js';
import { runningScorer } from './running.js';

export type { Scorer } from './scorer.js';

export const SCORERS = [prefixScorer, queueScorer, runningScorer, kvCacheScorer, loraScorer, loadScorer] as const;

export type ScorerName = (typeof SCORERS)[number]['name'];

/** A pool's scorer weights (0 turns a scorer off). */
export type ScoringWeights = Record<ScorerName, number>;

export const SCORER_NAMES: readonly ScorerName[] = SCORERS.map((s) => s.name);

export const DEFAULT_WEIGHTS: Readonly<ScoringWeights> = Object.freeze(
  Object.fromEntries(SCORERS.map((s) => [s.name, s.defaultWeight])) as ScoringWeights,
);
