/**
 * Whether a request may go on to a model server: the one admission step of an exchange, in two parts.
 *
 * 1. `authenticate`, from the request's head: the bearer token → an Identity, or the 401. With auth off
 *    every request is ANONYMOUS (every model allowed). Synchronous when the token was verified before;
 *    otherwise a promise (the exchange keeps the body meanwhile and forwards nothing until it settles).
 * 2. `admit`, once the body has named the model and the pool is known: the token's models (the requested
 *    name and, for an alias, the target chosen) → 403 when not allowed; then each AdmissionCheck in order
 *    (tenant quotas are such a check), the first refusal answered.
 *
 * `authenticate`'s promise never rejects; a check's promise should not either (one that does is a bug in
 * that request: the exchange answers 500). An exchange whose client left meanwhile drops the result.
 */
import { ModelGrant, type Identity } from '../auth/claims.js';
import type { AuthResult, Authenticator } from '../auth/authenticator.js';
import { errors, type ApiError } from '../openai/errors.js';

/** What a check is told about a request that passed authentication and names a served model. */
export interface AdmissionRequest {
  readonly identity: Identity;
  /** the model as the client named it */
  readonly model: string;
  /** the model the pool is asked for (an alias's chosen target; else the same as `model`) */
  readonly target: string;
  readonly pool: string;
  /** the prompt's estimated size in tokens */
  readonly promptTokens: number;
}

/** A refusal, or undefined to let the request go on. */
export type Verdict = ApiError | undefined;

/**
 * One rule a request must pass before it is sent (tenant quotas, later). Synchronous when it can decide
 * alone; a promise (which must not reject) when it asks something else (a Redis counter).
 */
export interface AdmissionCheck {
  readonly name: string;
  check(req: AdmissionRequest): Verdict | Promise<Verdict>;
}

/** The identity of every request when auth.mode is none. */
export const ANONYMOUS: Identity = Object.freeze({ tenant: '', models: ModelGrant.ALL, priority: undefined, expiresAt: Infinity });

export class Admission {
  constructor(
    /** undefined: auth.mode none */
    private readonly auth: Authenticator | undefined,
    private readonly checks: readonly AdmissionCheck[] = [],
  ) {}

  /** Part 1: the identity for the request's Authorization header (undefined when none was sent). */
  authenticate(authorization: string | undefined): AuthResult | Promise<AuthResult> {
    return this.auth ? this.auth.authenticate(authorization) : ANONYMOUS;
  }

  /** Part 2: the token's models, then every check in order. */
  admit(req: AdmissionRequest): Verdict | Promise<Verdict> {
    const models = req.identity.models;
    if (!models.allows(req.model)) return errors.modelNotAllowed(req.model);
    if (req.target !== req.model && !models.allows(req.target)) return errors.modelNotAllowed(req.target);
    return this.runChecks(req, 0);
  }

  private runChecks(req: AdmissionRequest, from: number): Verdict | Promise<Verdict> {
    for (let i = from; i < this.checks.length; i++) {
      const v = this.checks[i].check(req);
      if (v instanceof Promise) return v.then((r) => r ?? this.runChecks(req, i + 1));
      if (v) return v;
    }
    return undefined;
  }

  close(): void {
    this.auth?.close();
  }
}
