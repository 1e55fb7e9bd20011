/**
 * `auth.mode: jwt`: a request's `Authorization: Bearer …` turned into an Identity, or the 401 to answer.
 *
 * Verified tokens are remembered in an LRU (lru-cache) keyed by the SHA-256 of the token, each until its
 * own `exp` and never longer, so a client's steady stream of requests costs one hash and one lookup, and
 * the answer is synchronous. A token seen for the first time is verified by jose (asynchronously: WebCrypto
 * and perhaps a key fetch); requests carrying the same new token at once share one verification.
 *
 * What is checked (RFC 8725): the algorithm is one the config lists (so never "none", and never an HMAC
 * with a public key: the config refuses that pairing), the signature with a configured key found by
 * `kid`/`alg` only, `iss`, `aud`, `exp` (required), `nbf` and `iat` (not in the future) with `clock_skew`,
 * and no `crit` header jose does not implement. Answers name the category of a failure, never the token.
 */
import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { decodeProtectedHeader, jwtVerify, type JWTHeaderParameters } from 'jose';
import { errors, type ApiError } from '../openai/errors.js';
import { identityOf, type ClaimNames, type Identity } from './claims.js';
import { keySource, type KeyConfig, type KeyLog, type KeySource } from './keys.js';

export interface JwtConfig extends KeyConfig, ClaimNames {
  issuer: string;
  audience: string;
  /** ms */
  clock_skew: number;
  cache_entries: number;
}

export type AuthResult = Identity | ApiError;

/** The compact serialization: three base64url segments (a JWE's five, or anything else, is refused). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const BEARER = /^bearer +(\S+) *$/i;
/** A kid longer than this is not a key id we would have issued. */
const MAX_KID = 256;

export function isApiError(r: AuthResult): r is ApiError {
  return 'code' in r;
}

export class Authenticator {
  private readonly cache: LRUCache<string, Identity> | undefined;
  private readonly inFlight = new Map<string, Promise<AuthResult>>();
  /** verifications run (not answered from the cache), for tests and the bench */
  verifications = 0;

  private constructor(
    private readonly cfg: JwtConfig,
    private readonly keys: KeySource,
  ) {
    this.cache = cfg.cache_entries > 0 ? new LRUCache({ max: cfg.cache_entries }) : undefined;
  }

  /** Reads the keys (and fetches a jwks_url once; a failure there is logged and retried on demand). */
  static async create(cfg: JwtConfig, log: KeyLog): Promise<Authenticator> {
    const keys = await keySource(cfg, log);
    await keys.ready();
    return new Authenticator(cfg, keys);
  }

  close(): void {
    this.keys.close();
  }

  /**
   * The identity for an Authorization header value (undefined: none sent), or the 401 to answer.
   * Synchronous for a token verified before and not expired; otherwise a promise that never rejects.
   */
  authenticate(authorization: string | undefined): AuthResult | Promise<AuthResult> {
    if (authorization === undefined) return errors.missingToken();
    const m = BEARER.exec(authorization);
    // another scheme (Basic…) carries no bearer token: answered as if none was sent (RFC 6750 §3.1)
    if (!m) return /^bearer\b/i.test(authorization) ? errors.invalidToken('malformed') : errors.missingToken();
    const token = m[1];
    if (!COMPACT_JWS.test(token)) return errors.invalidToken('malformed');
    const digest = hash('sha256', token, 'base64'); // one-shot: about half createHash's cost
    const known = this.cache?.get(digest);
    if (known !== undefined) {
      if (known.expiresAt > Date.now()) return known;
      this.cache!.delete(digest);
    }
    let pending = this.inFlight.get(digest);
    if (pending === undefined) {
      pending = this.verify(token, digest).finally(() => this.inFlight.delete(digest));
      this.inFlight.set(digest, pending);
    }
    return pending;
  }

  private async verify(token: string, digest: string): Promise<AuthResult> {
    this.verifications++;
    const cfg = this.cfg;
    let header: JWTHeaderParameters;
    try {
      header = decodeProtectedHeader(token) as JWTHeaderParameters;
    } catch {
      return errors.invalidToken('malformed');
    }
    // checked before any key lookup, so a hostile kid never reaches a fetch
    if (header.kid !== undefined && (typeof header.kid !== 'string' || header.kid.length === 0 || header.kid.length > MAX_KID)) {
      return errors.invalidToken('malformed');
    }
    if (typeof header.alg !== 'string' || !cfg.algorithms.includes(header.alg)) return errors.invalidToken('unsupported algorithm');
    let payload: Record<string, unknown>;
    try {
      const r = await jwtVerify(token, (h: JWTHeaderParameters) => this.keys.lookup(h), {
        algorithms: [...cfg.algorithms],
        issuer: cfg.issuer,
        audience: cfg.audience,
        clockTolerance: cfg.clock_skew / 1000,
        requiredClaims: ['exp'],
      });
      payload = r.payload as Record<string, unknown>;
    } catch (err) {
      return errors.invalidToken(category(err));
    }
    const now = Date.now();
    if (typeof payload.iat === 'number' && payload.iat * 1000 > now + cfg.clock_skew) return errors.invalidToken('not yet valid');
    const identity = identityOf(payload, cfg);
    if ('problem' in identity) return errors.invalidToken(identity.problem);
    // remembered until its own exp, never longer (an exp within the skew: not remembered at all)
    if (this.cache && identity.expiresAt > now) this.cache.set(digest, identity);
    return identity;
  }
}

/** jose's error as the category a client is told. */
export function category(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  const claim = (err as { claim?: unknown }).claim;
  const reason = (err as { reason?: unknown }).reason;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return 'expired';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (reason === 'missing') return `missing claim ${String(claim)}`;
      if (claim === 'nbf' || claim === 'iat') return 'not yet valid';
      if (claim === 'iss') return 'wrong issuer';
      if (claim === 'aud') return 'wrong audience';
      return 'malformed';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'bad signature';
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
    case 'ERR_JWKS_TIMEOUT':
      return 'unknown key';
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return 'unsupported algorithm';
    case 'ERR_JOSE_NOT_SUPPORTED':
      return /Extension Header Parameter/.test(String((err as Error).message)) ? 'unsupported critical header' : 'unsupported algorithm';
    default:
      // ERR_JWS_INVALID, ERR_JWT_INVALID (bad base64, bad JSON, bad claim types), a key of the wrong type…
      return 'malformed';
  }
}
