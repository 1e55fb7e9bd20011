// Shared by the routing tests: a seeded random sequence for the picker and the ticket of a pick that
// must have succeeded.
import type { PickResult, Ticket } from '../../src/routing/index.js';

/** A deterministic sequence in [0, 1) (a linear congruential generator), for `Router`'s `random` option. */
export function seq(seed = 1): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
}

/** The ticket of a pick that must have succeeded (throws, naming what came instead). */
export function ok(r: PickResult): Ticket {
  if (r.kind !== 'ok') throw new Error(`expected ok, got ${r.kind}`);
  return r.ticket;
}
