/**
 * What a verified token says about its bearer, as the gateway uses it: the tenant, the models it may
 * use (names or glob patterns), and its priority. Pure.
 */

export const PRIORITIES = ['critical', 'standard', 'sheddable'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The bearer of a verified token (or, with auth off, nobody in particular). */
export interface Identity {
  /** the `tenant_claim`'s value ('' with auth off) */
  readonly tenant: string;
  /** the models it may use */
  readonly models: ModelGrant;
  /** the `priority_claim`'s value when it is one of PRIORITIES; traffic management reads it */
  readonly priority: Priority | undefined;
  /** ms since the epoch when the token expires (Infinity with auth off) */
  readonly expiresAt: number;
}

/** Which model names a token allows: exact names and patterns where `*` stands for any characters. */
export class ModelGrant {
  static readonly ALL = new ModelGrant(['*']);
  static readonly NONE = new ModelGrant([]);
  private readonly exact = new Set<string>();
  private readonly patterns: string[] = [];
  private readonly all: boolean;

  private constructor(entries: readonly string[]) {
    let all = false;
    for (const e of entries) {
      if (e === '*') all = true;
      else if (e.includes('*')) this.patterns.push(e);
      else this.exact.add(e);
    }
    this.all = all;
  }

  /**
   * The claim's value: a list of names and patterns, or one string (a name, a pattern, "*", or several
   * separated by spaces or commas, as OAuth scopes are). Anything else, or no claim, allows nothing.
   */
  static fromClaim(value: unknown): ModelGrant {
    if (typeof value === 'string') return new ModelGrant(value.split(/[\s,]+/).filter((s) => s.length > 0));
    if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return new ModelGrant(value as string[]);
    return ModelGrant.NONE;
  }

  allows(model: string): boolean {
    if (this.all || this.exact.has(model)) return true;
    for (const p of this.patterns) if (globMatch(p, model)) return true;
    return false;
  }
}

/**
 * Whether `text` matches `pattern`, where `*` is any run of characters (`/` included: `meta-llama/*`).
 * Backtracks to the last star only: at worst pattern length × text length steps, never exponential,
 * whatever pattern a token carries.
 */
export function globMatch(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.length && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else return false;
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

export interface ClaimNames {
  tenant_claim: string;
  models_claim: string;
  priority_claim: string;
}

/** The identity a verified payload gives, or why it gives none (a category for the 401). */
export function identityOf(payload: Record<string, unknown>, names: ClaimNames): Identity | { problem: string } {
  const tenant = payload[names.tenant_claim];
  if (typeof tenant !== 'string' || tenant.length === 0) return { problem: `no "${names.tenant_claim}" claim naming the tenant` };
  const priority = payload[names.priority_claim];
  return {
    tenant,
    models: ModelGrant.fromClaim(payload[names.models_claim]),
    priority: typeof priority === 'string' && (PRIORITIES as readonly string[]).includes(priority) ? (priority as Priority) : undefined,
    expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : Infinity,
  };
}
