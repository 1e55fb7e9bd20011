/**
 * Where verification keys come from (`auth.jwt`): a JSON Web Key Set from a file or a URL, a PEM public
 * key, or a shared secret. Each becomes one KeyLookup: given a token's protected header, the key to check
 * it with. A key is found by `kid` and `alg` in the configured set only: a header's own `jwk`, `jku`,
 * `x5u` or `x5c` is never looked at (a token must not bring the key that vouches for it).
 *
 * The URL's key set is cached: fetched at start, used until `jwks_refresh` old and then refreshed in
 * the background while the old set keeps serving (stale-while-revalidate: a key server that is down never
 * fails tokens whose keys are known); a `kid` it does not hold fetches again at once, at most once per
 * `jwks_cooldown`, and waits at most `jwks_timeout`. There is never a fetch per request. jose's
 * createRemoteJWKSet is not used because on expiry it makes every request wait for the fetch and fails
 * them all while the key server is down.
 */
import { readFileSync } from 'node:fs';
import { createLocalJWKSet, errors as joseErrors, importSPKI, importX509, type CryptoKey, type JSONWebKeySet, type JWTHeaderParameters } from 'jose';
import { readSecret } from '../config/secrets.js';

/** The key for a token, from its (unverified) protected header; throws jose's errors when there is none. */
export type KeyLookup = (header: JWTHeaderParameters) => Promise<CryptoKey | Uint8Array>;

/** A key source and what the gateway may need to do with it over its life. */
export interface KeySource {
  lookup: KeyLookup;
  /** a first fetch (jwks_url) before the gateway listens; resolves when done or failed (logged) */
  ready(): Promise<void>;
  /** stops background work (none outlives the gateway) */
  close(): void;
}

export interface KeyConfig {
  jwks_file?: string;
  jwks_url?: string;
  public_key_file?: string;
  public_key_env?: string;
  secret_file?: string;
  secret_env?: string;
  jwks_refresh: number;
  jwks_cooldown: number;
  jwks_timeout: number;
  algorithms: readonly string[];
}

export interface KeyLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** Shared secrets shorter than this are refused at start (RFC 7518 §3.2: at least the hash size). */
const MIN_SECRET_BYTES = 32;
/** A key set document larger than this is not read (a real one is a few kB). */
const MAX_JWKS_BYTES = 512 * 1024;

export async function keySource(cfg: KeyConfig, log: KeyLog): Promise<KeySource> {
  if (cfg.jwks_file !== undefined) {
    const set = localSet(parseJwks(readText(cfg.jwks_file, 'auth.jwt.jwks_file'), cfg.jwks_file));
    return { lookup: set, ready: async () => undefined, close: () => undefined };
  }
  if (cfg.jwks_url !== undefined) {
    const url = new URL(cfg.jwks_url);
    if (url.protocol !== 'https:' && !['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)) {
      log.warn({ url: url.origin }, 'auth.jwt.jwks_url is not HTTPS: whoever can change it in transit can mint tokens');
    }
    return new RemoteKeySet(url, cfg, log);
  }
  const secret = readSecret({ file: cfg.secret_file, env: cfg.secret_env }, 'auth.jwt secret');
  if (secret !== undefined) {
    const bytes = new TextEncoder().encode(secret);
    if (bytes.length < MIN_SECRET_BYTES) throw new Error(`auth.jwt secret: ${bytes.length} bytes; a shared secret needs at least ${MIN_SECRET_BYTES}`);
    return { lookup: async () => bytes, ready: async () => undefined, close: () => undefined };
  }
  const pem = readSecret({ file: cfg.public_key_file, env: cfg.public_key_env }, 'auth.jwt public key');
  if (pem === undefined) throw new Error('auth.jwt: no key source (jwks_file, jwks_url, public_key_file, public_key_env, secret_file or secret_env)');
  // one import per algorithm: a WebCrypto key is bound to the algorithm it was imported for
  const keys = new Map<string, CryptoKey>();
  for (const alg of cfg.algorithms) {
    try {
      keys.set(alg, pem.includes('-----BEGIN CERTIFICATE-----') ? await importX509(pem, alg) : await importSPKI(pem, alg));
    } catch (err) {
      throw new Error(`auth.jwt public key: not a PEM public key (SPKI) or certificate usable for ${alg} (${(err as Error).message})`);
    }
  }
  return {
    lookup: async (header) => {
      const key = keys.get(header.alg ?? '');
      if (!key) throw new joseErrors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
      return key;
    },
    ready: async () => undefined,
    close: () => undefined,
  };
}

function readText(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${what}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/** A key set document: `{"keys": [...]}`, checked before jose sees it. */
export function parseJwks(text: string, where: string): JSONWebKeySet {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`${where}: not JSON (${(err as Error).message})`);
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.some((k) => k === null || typeof k !== 'object' || Array.isArray(k))) {
    throw new Error(`${where}: not a JSON Web Key Set (an object with a "keys" array of keys)`);
  }
  // private parts are never needed to verify; a set that carries them is a mistake worth refusing
  if (keys.some((k: Record<string, unknown>) => 'd' in k || k.kty === 'oct')) {
    throw new Error(`${where}: the key set holds private or symmetric keys; publish public keys only`);
  }
  return doc as JSONWebKeySet;
}

/** jose's local key set behind the KeyLookup signature (selection by kid, alg and kty only). */
function localSet(jwks: JSONWebKeySet): KeyLookup {
  const set = createLocalJWKSet(jwks);
  return (header) => set(header, { payload: '', signature: '' });
}

/** A key set fetched from a URL and cached; see the file comment for the refresh rules. */
export class RemoteKeySet implements KeySource {
  private current: KeyLookup | undefined;
  /** Date.now() of the last successful fetch, and of the last try, successful or not */
  private fetchedAt = 0;
  private triedAt = 0;
  private pending: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly url: URL,
    private readonly cfg: KeyConfig,
    private readonly log: KeyLog,
  ) {}

  ready(): Promise<void> {
    return this.refresh();
  }

  close(): void {
    this.closed = true;
  }

  /** whether a fetch is in flight (for tests and /debug) */
  get refreshing(): boolean {
    return this.pending !== undefined;
  }

  readonly lookup: KeyLookup = async (header) => {
    const now = Date.now();
    if (this.current && now - this.fetchedAt > this.cfg.jwks_refresh && this.mayFetch(now)) {
      void this.refresh(); // the old set answers meanwhile
    }
    const known = this.current;
    if (!known) {
      if (this.pending) await this.pending;
      else if (this.mayFetch(now)) await this.refresh();
      return this.keySet()(header);
    }
    try {
      return await known(header);
    } catch (err) {
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
      // a kid we do not know: perhaps a key rotated in since the last fetch
      if (this.pending) await this.pending;
      else if (this.mayFetch(Date.now())) await this.refresh();
      else throw err;
      return this.keySet()(header);
    }
  };

  private keySet(): KeyLookup {
    if (!this.current) throw new joseErrors.JWKSNoMatchingKey('no key set could be fetched');
    return this.current;
  }

  private mayFetch(now: number): boolean {
    return !this.closed && now - this.triedAt >= this.cfg.jwks_cooldown;
  }

  /** One fetch at a time; never rejects (a failure keeps the old set and is logged). */
  private refresh(): Promise<void> {
    if (this.pending) return this.pending;
    this.triedAt = Date.now();
    const p = this.fetchSet().then(
      (set) => {
        this.current = set;
        this.fetchedAt = Date.now();
      },
      (err: unknown) => {
        this.log.warn({ url: this.url.origin + this.url.pathname, err: (err as Error).message }, 'auth: fetching the JWKS failed; the keys already known stay in use');
      },
    ).finally(() => {
      if (this.pending === p) this.pending = undefined;
    });
    this.pending = p;
    return p;
  }

  private async fetchSet(): Promise<KeyLookup> {
    const res = await fetch(this.url, {
      signal: AbortSignal.timeout(this.cfg.jwks_timeout),
      redirect: 'error',
      headers: { accept: 'application/jwk-set+json, application/json' },
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`status ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_JWKS_BYTES) {
      await res.body?.cancel();
      throw new Error(`the key set is larger than ${MAX_JWKS_BYTES} bytes`);
    }
    const text = await readCapped(res, MAX_JWKS_BYTES);
    return localSet(parseJwks(text, 'the key set'));
  }
}

async function readCapped(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel();
      throw new Error(`the key set is larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
