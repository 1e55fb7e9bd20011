/**
 * Keys the config names but never holds: read from a file or an environment variable when the gateway
 * starts. A missing or empty one is an error that names where it was looked for, never the value.
 */
import { readFileSync } from 'node:fs';

export interface SecretSource {
  file?: string;
  env?: string;
}

/** The text of the key (a file's trailing newline dropped), or undefined when neither source is given. */
export function readSecret(source: SecretSource, what: string): string | undefined {
  if (source.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(source.file, 'utf8');
    } catch (err) {
      throw new Error(`${what}: cannot read ${source.file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    text = text.replace(/\r?\n$/, '');
    if (text.length === 0) throw new Error(`${what}: ${source.file} is empty`);
    return text;
  }
  if (source.env !== undefined) {
    const text = process.env[source.env];
    if (text === undefined || text.length === 0) throw new Error(`${what}: the environment variable ${source.env} is not set or empty`);
    return text;
  }
  return undefined;
}
