/**
 * `infergate serve`: start a gateway from a loaded config and run it until SIGTERM/SIGINT; with the config's
 * file, reload it on SIGHUP and when it changes (reload.ts).
 */
import type { Config } from '../config/schema.js';
import { createLogger, effectiveLevel, type Logger } from '../observability/logger.js';
import { Gateway } from './server.js';
import { exitDespiteIdleConnections } from '../common/listen.js';
import { ConfigReloader } from './reload.js';

export async function runGateway(config: Config, file?: string): Promise<number> {
  let logger: Logger;
  try {
    logger = createLogger(effectiveLevel(config.logging.level), config.logging.format);
  } catch (err) {
    process.stderr.write(`infergate: ${(err as Error).message}\n`);
    return 1;
  }
  const gateway = new Gateway(config, logger);
  let addrs;
  try {
    addrs = await gateway.start();
  } catch (err) {
    process.stderr.write(`infergate: ${(err as Error).message}\n`);
    await gateway.stop(0).catch(() => undefined);
    return 1;
  }
  const reloader = file ? new ConfigReloader({ file, gateway, logger, levelFromEnv: process.env.LOG_LEVEL !== undefined }) : undefined;
  reloader?.start();
  process.stdout.write(`listening on ${addrs.url}\nadmin listening on ${addrs.adminUrl}\n`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (sig: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      reloader?.stop();
      logger.info({ signal: sig }, 'shutting down');
      const exit = (code: number) => {
        // idle keep-alive client connections are not waited for: every answer has been sent
        exitDespiteIdleConnections(code);
        resolve(code);
      };
      gateway.stop().then(
        () => exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}
