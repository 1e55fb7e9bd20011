/**
 * The policy registry: the one list of policies. The config schema's `policy`/`shadow_policy` values and
 * the pool's dispatch take the names from here. Adding a policy: one file beside these and one line in
 * POLICIES.
 */
import { leastRequest } from './least-request.js';
import type { Policy } from './policy.js';
import { randomPolicy } from './random.js';
import { roundRobin } from './round-robin.js';
import { scored } from './scored.js';

export { PolicyContext, type Policy } from './policy.js';

export const POLICIES = [scored, roundRobin, leastRequest, randomPolicy] as const;

export type PolicyName = (typeof POLICIES)[number]['name'];

export const POLICY_NAMES = POLICIES.map((p) => p.name) as unknown as readonly [PolicyName, ...PolicyName[]];

export const POLICY_BY_NAME: Readonly<Record<PolicyName, Policy>> = Object.freeze(
  Object.fromEntries(POLICIES.map((p) => [p.name, p])) as Record<PolicyName, Policy>,
);
