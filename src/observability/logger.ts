/** Structured logs (pino), one JSON object a line on stdout. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { service: 'infergate' }, timestamp: pino.stdTimeFunctions.isoTime });
}
