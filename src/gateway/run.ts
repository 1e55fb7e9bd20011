/**
 * `infergate serve`: start a gateway from a loaded config and run it until SIGTERM/SIGINT; with the config's
 * file, reload it on SIGHUP and when it changes (reload.ts). As a worker of `serve --workers N` (`worker`
 * set, forked by workers.ts with an IPC channel) it listens where its parent says, tells the parent when it
 * is ready instead of printing its addresses, answers the parent's metric requests, and drains when the
 * parent goes away.
 */
import type { Config } from '../config/schema.js';
import { createLogger, effectiveLevel, type Logger } from '../observability/logger.js';
import { Gateway } from './server.js';
import { exitDespiteIdleConnections } from '../common/listen.js';
import { ConfigReloader } from './reload.js';
import { isMetricsRequest, type WorkerMessage } from './worker-protocol.js';

/** A worker's place among its siblings (workers.ts sets it through the environment). */
export interface WorkerRole {
  /** 1..N, in the logs' `worker` field */
  id: number;
  /** the client port, shared with the siblings */
  port: number;
}

export async function runGateway(config: Config, file?: string, worker?: WorkerRole): Promise<number> {
  let logger: Logger;
  try {
    logger = createLogger(effectiveLevel(config.logging.level), config.logging.format);
  } catch (err) {
    process.stderr.write(`infergate: ${(err as Error).message}\n`);
    return 1;
  }
  if (worker) logger = logger.child({ worker: worker.id });
  const gateway = new Gateway(config, logger, worker ? { port: worker.port, adminHost: '127.0.0.1', adminPort: 0 } : undefined);
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
  if (worker) {
    answerParent(gateway, logger);
    const ready: WorkerMessage = { t: 'ready', url: addrs.url, adminUrl: addrs.adminUrl };
    process.send?.(ready);
  } else {
    process.stdout.write(`listening on ${addrs.url}\nadmin listening on ${addrs.adminUrl}\n`);
  }
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
    // a worker whose parent is gone (killed) drains and exits rather than serve on unsupervised
    if (worker) process.once('disconnect', () => onSignal('SIGTERM'));
  });
}

/** A worker answers its parent's requests for its metrics (the parent's /metrics sums them). */
function answerParent(gateway: Gateway, logger: Logger): void {
  // a send on a channel that closed meanwhile reports here (the parent is gone: the worker drains)
  process.on('error', (err) => logger.warn({ err }, 'IPC channel to the parent failed'));
  process.on('message', (m: unknown) => {
    if (!isMetricsRequest(m)) return;
    gateway.metrics.registry.getMetricsAsJSON().then(
      (metrics) => {
        const reply: WorkerMessage = { t: 'metrics', id: m.id, json: JSON.stringify(metrics) };
        if (process.connected) process.send?.(reply);
      },
      (err: unknown) => logger.error({ err }, 'metrics for the parent failed'),
    );
  });
}
