/**
 * Structured logs (pino) on stdout: one JSON object a line, or, on a terminal, pino-pretty's coloured lines
 * when it is installed (it is a development dependency: absent from the container image and the single
 * executable, where the output stays JSON without a word).
 */
import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogFormat = 'auto' | 'json' | 'pretty';

/**
 * The level in force: LOG_LEVEL when set (and not empty), else the config's `logging.level`. An unknown
 * LOG_LEVEL is an error naming the accepted ones (thrown: the caller exits with it).
 */
export function effectiveLevel(configLevel: string, env: string | undefined = process.env.LOG_LEVEL): string {
  if (env === undefined || env === '') return configLevel;
  const level = env.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`LOG_LEVEL=${JSON.stringify(env)} is not a level (${LOG_LEVELS.join(', ')})`);
  return level;
}

/** pino-pretty as a synchronous stream, or undefined when it is not installed (or cannot load). */
function prettyStream(): DestinationStream | undefined {
  try {
    const require = createRequire(import.meta.url);
    const pretty = require('pino-pretty') as (opts: Record<string, unknown>) => DestinationStream;
    return pretty({ colorize: process.stdout.isTTY === true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' });
  } catch {
    return undefined;
  }
}

/**
 * `format`: json always; pretty when pino-pretty loads; auto = pretty only when stdout is a terminal.
 * `level` defaults to LOG_LEVEL (when valid), else info.
 */
export function createLogger(level: string = effectiveLevel('info'), format: LogFormat = 'auto'): Logger {
  const options = { level, base: { service: 'infergate' }, timestamp: pino.stdTimeFunctions.isoTime };
  const pretty = format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true) ? prettyStream() : undefined;
  return pretty ? pino(options, pretty) : pino(options);
}
