/**
 * The development signing key of `infergate token` and `infergate demo`: an ES256 key pair kept in
 * config/dev-keys/ of the package (git-ignored), made on first use. `private.jwk.json` holds the private
 * key (mode 0600); `jwks.json` the public key as a JSON Web Key Set, which config/demo.yaml's
 * `auth.jwt.jwks_file` names. For local use only: anyone who can read the directory can mint tokens.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';

export const DEV_KEY_DIR = fileURLToPath(new URL('../../config/dev-keys', import.meta.url));
export const DEV_ALG = 'ES256';

export interface SigningKey {
  jwk: JWK;
  kid: string;
  alg: string;
}

/** The dev key pair's private key, made (with its JWKS beside it) when the directory has none. */
export async function ensureDevKey(dir = DEV_KEY_DIR): Promise<SigningKey> {
  const file = join(dir, 'private.jwk.json');
  if (!existsSync(file)) {
    try {
      await generate(dir);
    } catch (err) {
      throw new Error(`cannot make the dev key pair in ${dir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); use --key FILE`);
    }
  }
  return readSigningKey(file);
}

/** A private JWK file (the dev key's, or one given with --key). */
export function readSigningKey(file: string): SigningKey {
  const jwk = JSON.parse(readFileSync(file, 'utf8')) as JWK;
  if (typeof jwk.d !== 'string') throw new Error(`${file}: not a private JWK (no "d")`);
  const alg = jwk.alg ?? (jwk.kty === 'EC' ? 'ES256' : jwk.kty === 'OKP' ? 'EdDSA' : 'RS256');
  return { jwk, kid: jwk.kid ?? '', alg };
}

/**
 * Both files are written into a fresh directory which is then renamed into place, so two processes
 * starting at once (tests, a demo and a token command) never see half a key pair: the loser of the rename
 * uses the winner's keys.
 */
async function generate(dir: string): Promise<void> {
  const parent = dirname(dir);
  mkdirSync(parent, { recursive: true });
  const { publicKey, privateKey } = await generateKeyPair(DEV_ALG, { extractable: true });
  const pub = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(pub);
  const priv = { ...(await exportJWK(privateKey)), kid, alg: DEV_ALG, use: 'sig' };
  const jwks = { keys: [{ ...pub, kid, alg: DEV_ALG, use: 'sig' }] };
  const tmp = mkdtempSync(join(parent, '.dev-keys-'));
  writeFileSync(join(tmp, 'private.jwk.json'), `${JSON.stringify(priv, null, 2)}\n`, { mode: 0o600 });
  writeFileSync(join(tmp, 'jwks.json'), `${JSON.stringify(jwks, null, 2)}\n`);
  chmodSync(tmp, 0o700);
  try {
    renameSync(tmp, dir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    // another process made them first: theirs are used
  }
}

export interface TokenClaims {
  sub: string;
  issuer: string;
  audience: string;
  /** seconds */
  ttl: number;
  /** claim name → value (tenant, models, priority under their configured names) */
  extra: Record<string, unknown>;
}

export async function mintToken(key: SigningKey, c: TokenClaims): Promise<string> {
  const privateKey = await importJWK(key.jwk, key.alg);
  const now = Math.floor(Date.now() / 1000);
  const header: { alg: string; typ: string; kid?: string } = { alg: key.alg, typ: 'JWT' };
  if (key.kid) header.kid = key.kid;
  return new SignJWT(c.extra)
    .setProtectedHeader(header)
    .setSubject(c.sub)
    .setIssuer(c.issuer)
    .setAudience(c.audience)
    .setIssuedAt(now)
    .setExpirationTime(now + c.ttl)
    .sign(privateKey);
}
