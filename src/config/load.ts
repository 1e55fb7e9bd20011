/**
 * Reading a config file: YAML → zod validation, with every problem named by its key path and line.
 * I/O is limited to reading the file and testing the files it names; `parseConfigText` is pure and is what
 * tests and reload use.
 */
import { X509Certificate } from 'node:crypto';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { configWarnings, fileProblems, type ConfigNotice, type FileCheck } from './checks.js';
import { certificateNotAfter, checkTlsFiles } from '../common/tls-files.js';
import { LineCounter, parseDocument, isNode, type Document } from 'yaml';
import { configSchema, type Config } from './schema.js';

export interface ConfigProblem {
  path: string; // "pools.llama-8b.metrics.interval" ("" for the whole file)
  line?: number; // 1-based line in the YAML file
  message: string;
}

export type ConfigResult = { ok: true; config: Config } | { ok: false; problems: ConfigProblem[] };

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: ConfigProblem[],
  ) {
    super(formatProblems(file, problems));
  }
}

export function parseConfigText(text: string): ConfigResult {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      problems: doc.errors.map((e) => ({
        path: '',
        line: e.linePos?.[0]?.line ?? (e.pos ? lineCounter.linePos(e.pos[0]).line : undefined),
        message: `YAML: ${e.message.split('\n')[0]}`,
      })),
    };
  }
  const data: unknown = doc.toJS({ maxAliasCount: 100 });
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { ok: false, problems: [{ path: '', line: 1, message: 'the config file must be a YAML mapping' }] };
  }
  const parsed = configSchema.safeParse(data);
  if (parsed.success) return { ok: true, config: parsed.data };
  const problems = parsed.error.issues.map((issue) => {
    const path = issue.path.map(String);
    // An unknown key is reported on its parent; point at the key itself.
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    const line = lineOf(doc, lineCounter, keys.length ? [...issue.path, keys[0]] : issue.path);
    const shown = keys.length ? [...path, keys[0]].join('.') : path.join('.');
    return { path: shown, line, message: issue.message };
  });
  return { ok: false, problems };
}

/** The line of the deepest node of `path` that exists in the document. */
function lineOf(doc: Document, lc: LineCounter, path: PropertyKey[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const sub = path.slice(0, n);
    // For a key we point at the key's line (its value may start on a later line).
    const pair = n > 0 ? findPair(doc, sub) : undefined;
    if (pair) return lc.linePos(pair).line;
    const node = n === 0 ? doc.contents : doc.getIn(sub as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}

function findPair(doc: Document, path: PropertyKey[]): number | undefined {
  const parent = path.length === 1 ? doc.contents : doc.getIn(path.slice(0, -1) as unknown[], true);
  const last = path[path.length - 1];
  if (parent && typeof parent === 'object' && 'items' in parent && Array.isArray(parent.items)) {
    for (const item of parent.items as unknown[]) {
      if (item && typeof item === 'object' && 'key' in item) {
        const key = (item as { key: unknown }).key;
        if (isNode(key) && String((key as { value?: unknown }).value) === String(last) && key.range) return key.range[0];
      }
    }
  }
  return undefined;
}

export function loadConfigFile(file: string): Config {
  return loadConfigChecked(file).config;
}

/**
 * Reads and validates `file`, then checks what the valid config names and sets (./checks.ts): a referenced
 * file that cannot be read is an error (ConfigError, like a schema problem); dangerous settings come back
 * as warnings, each with its key path and line.
 */
export function loadConfigChecked(file: string, check: FileCheck = readableFile): { config: Config; warnings: ConfigProblem[] } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [{ path: '', message: `cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}` }]);
  }
  const result = parseConfigText(text);
  if (!result.ok) throw new ConfigError(file, result.problems);
  const config = withKeyPathsFrom(result.config, dirname(resolve(file)));
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  const located = (n: ConfigNotice): ConfigProblem => ({ path: n.path.join('.'), line: lineOf(doc, lineCounter, n.path), message: n.message });
  const errors = fileProblems(config, check).map(located);
  if (errors.length === 0) errors.push(...tlsPairProblems(config).map(located), ...caFileProblems(config).map(located));
  if (errors.length) throw new ConfigError(file, errors);
  return { config, warnings: [...configWarnings(config), ...tlsWarnings(config)].map(located) };
}
/** The listener's certificate and key that are readable but not a usable pair (not PEM, encrypted, not matching). */
function tlsPairProblems(config: Config): ConfigNotice[] {
  const tls = config.listen.tls;
  if (!tls) return [];
  try {
    checkTlsFiles(tls.cert, tls.key);
    return [];
  } catch (err) {
    // the message starts with the key it is about ("listen.tls.key: …", "listen.tls: …")
    const m = /^(listen\.tls(?:\.cert|\.key)?): ([^]*)$/.exec((err as Error).message);
    return [{ path: (m?.[1] ?? 'listen.tls').split('.'), message: m?.[2] ?? (err as Error).message }];
  }
}

/** A pool's tls_ca_file that holds no PEM certificate (undici would fail every connection with a vague error). */
function caFileProblems(config: Config): ConfigNotice[] {
  const out: ConfigNotice[] = [];
  for (const [name, pool] of Object.entries(config.pools)) {
    const file = pool.tls_ca_file;
    if (file === undefined) continue;
    try {
      new X509Certificate(readFileSync(file));
    } catch (err) {
      out.push({ path: ['pools', name, 'tls_ca_file'], message: `${file}: holds no PEM certificate (${(err as Error).message})` });
    }
  }
  return out;
}

/** The listener's certificate past its end date (clients refuse it; the gateway still serves it). */
function tlsWarnings(config: Config, now = Date.now()): ConfigNotice[] {
  const tls = config.listen.tls;
  const notAfter = tls ? certificateNotAfter(tls.cert) : undefined;
  if (!tls || notAfter === undefined || notAfter.getTime() > now) return [];
  return [{ path: ['listen', 'tls', 'cert'], message: `${tls.cert}: the certificate expired on ${notAfter.toISOString()}; clients that check it refuse the connection` }];
}

/**
 * The config with the relative paths of its key files (auth.jwt.jwks_file, public_key_file, secret_file,
 * pools.*.api_key_file) made absolute from `dir`, the config file's directory, so a config and its keys
 * can move together. (listen.tls paths, older, stay relative to the working directory.)
 */
export function withKeyPathsFrom(config: Config, dir: string): Config {
  const abs = (p: string | undefined) => (p === undefined || isAbsolute(p) ? p : resolve(dir, p));
  const jwt = config.auth.jwt;
  if (jwt) {
    jwt.jwks_file = abs(jwt.jwks_file);
    jwt.public_key_file = abs(jwt.public_key_file);
    jwt.secret_file = abs(jwt.secret_file);
  }
  for (const pool of Object.values(config.pools)) {
    pool.api_key_file = abs(pool.api_key_file);
    pool.tls_ca_file = abs(pool.tls_ca_file);
  }
  return config;
}

const FILE_ERRORS: Record<string, string> = {
  ENOENT: 'does not exist',
  EACCES: 'cannot be read (permission denied)',
  EISDIR: 'is a directory, not a file',
};

/** null when `file` can be opened for reading; else why not, in words. */
export function readableFile(file: string): string | null {
  try {
    if (statSync(file).isDirectory()) return FILE_ERRORS.EISDIR;
    accessSync(file, constants.R_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return FILE_ERRORS[code] ?? `cannot be read (${code || String(err)})`;
  }
}

export function formatProblems(file: string, problems: ConfigProblem[], label?: 'warning'): string {
  return problems
    .map((p) => `${file}${p.line !== undefined ? `:${p.line}` : ''}: ${label ? `${label}: ` : ''}${p.path ? `${p.path}: ` : ''}${p.message}`)
    .join('\n');
}

/**
 * For the small commands (demo, token): the file's config, or undefined after its problems were written to
 * stderr. Anything that is not a config problem is thrown as it came.
 */
export function loadConfigOrReport(file: string): Config | undefined {
  try {
    return loadConfigFile(file);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return undefined;
  }
}
