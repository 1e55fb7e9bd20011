/**
 * infergate's own version. In the single executable (scripts/build-binary.mjs) there is no package.json
 * beside the code, so the bundler writes the version in as a literal for `__INFERGATE_VERSION__`; in a
 * checkout or an npm install that name is undeclared (typeof says "undefined") and package.json is read.
 */
import { readFileSync } from 'node:fs';

declare const __INFERGATE_VERSION__: string | undefined;

let cached: string | undefined;

/** "0.1.0"; "unknown" where neither source exists. */
export function infergateVersion(): string {
  if (cached !== undefined) return cached;
  if (typeof __INFERGATE_VERSION__ === 'string') return (cached = __INFERGATE_VERSION__);
  try {
    cached = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    cached = 'unknown';
  }
  return cached;
}
