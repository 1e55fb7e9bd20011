/**
 * Config hot reload for `infergate serve`: on SIGHUP, and when the config file changes (admin.watch_config),
 * the file is read and validated again and, if valid, applied by Gateway.reload (built first, swapped at
 * once; requests in flight keep the generation they started with).
 *
 * - A file that does not load (YAML, schema, a named file unreadable) or a part that cannot be built (a
 *   key file, the JWT keys) changes nothing: each problem is logged with its line, and
 *   infergate_config_reloads_total{result="error"} counts it.
 * - Keys that only a restart applies (listen and admin addresses, TLS paths, the front's limits, the quota
 *   store) keep their running values and are logged as "needs restart" with their names;
 *   result="needs_restart" counts such a reload (everything else in it is applied). A reload that applied
 *   all is result="success". One count per reload.
 * - The file watch: fs.watch on the file's directory (editors and Kubernetes ConfigMaps replace the file by
 *   rename or a symlink swap, which a watch on the file itself would lose), events settled for DEBOUNCE_MS,
 *   and a reload only when the content's hash differs from the last one read. SIGHUP always reloads (and
 *   so reads key files again).
 * - Reloads never overlap: a trigger during one runs once more after it.
 * - logging.level applies at once, unless LOG_LEVEL is set (it wins, as at start).
 *
 * Other SIGHUP listeners (TLS certificate reload) are left alone: this module adds and removes only its own.
 */
import { createHash } from 'node:crypto';
import { watch, readFileSync, realpathSync, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { ConfigError, formatProblems, loadConfigChecked } from '../config/load.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { ReloadOutcome } from './server.js';

/** File events are settled this long before the file is read (an editor's write, rename and chmod are one change). */
export const DEBOUNCE_MS = 500;

export type ReloadTrigger = 'SIGHUP' | 'file change';

export interface Reloadable {
  readonly config: Config;
  readonly metrics: GatewayMetrics;
  reload(next: Config): Promise<ReloadOutcome>;
}

export interface ReloaderOptions {
  file: string;
  gateway: Reloadable;
  logger: Logger;
  /** LOG_LEVEL was set: logging.level changes are not applied (LOG_LEVEL wins) */
  levelFromEnv: boolean;
}

export class ConfigReloader {
  private readonly file: string;
  private watcher: FSWatcher | undefined;
  private debounce: NodeJS.Timeout | undefined;
  /** sha256 of the text last read (at start, or by a reload): a file event with the same text does nothing */
  private lastHash: string;
  private running: Promise<void> | undefined;
  private queued: ReloadTrigger | undefined;
  private stopped = false;

  constructor(private readonly opts: ReloaderOptions) {
    this.file = resolve(opts.file);
    this.lastHash = hashOf(readText(this.file) ?? '');
  }

  private readonly onSighup = (): void => this.trigger('SIGHUP');

  start(): void {
    // every result is a series from the start (a rate over it needs its 0)
    for (const result of ['success', 'needs_restart', 'error']) this.opts.gateway.metrics.configReloads.inc({ result }, 0);
    process.on('SIGHUP', this.onSighup);
    this.setWatching(this.opts.gateway.config.admin.watch_config);
  }

  stop(): void {
    this.stopped = true;
    process.off('SIGHUP', this.onSighup);
    this.setWatching(false);
  }

  /** Resolves when no reload is running or queued (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private setWatching(on: boolean): void {
    if (on && !this.watcher && !this.stopped) {
      const dir = dirname(this.file);
      try {
        this.watcher = watch(dir, { persistent: false }, (_event, name) => {
          if (this.concerns(name)) this.fileEvent();
        });
        this.watcher.on('error', (err) => {
          this.opts.logger.warn({ err: err.message, dir }, 'config watch failed: the file is no longer watched (SIGHUP still reloads)');
          this.setWatching(false);
        });
        this.opts.logger.info({ file: this.file }, 'watching the config file for changes');
      } catch (err) {
        this.opts.logger.warn({ err: (err as Error).message, dir }, 'cannot watch the config file\'s directory (SIGHUP still reloads)');
      }
    } else if (!on && this.watcher) {
      this.watcher.close();
      this.watcher = undefined;
      if (this.debounce) clearTimeout(this.debounce);
      this.debounce = undefined;
    }
  }

  /**
   * Whether an event in the directory may be the config's change: the file's own name, the name of the
   * file it links to (an edit of the target beside it), a Kubernetes ConfigMap's `..data` swap, or an
   * event without a name. Others (an editor's swap files, unrelated files) are passed over, so a busy
   * directory does not keep postponing the settled read.
   */
  private concerns(name: string | Buffer | null): boolean {
    if (name === null) return true;
    const n = name.toString();
    if (n === basename(this.file) || n.startsWith('..')) return true;
    try {
      const real = realpathSync(this.file);
      return basename(real) === n && dirname(real) === realpathSync(dirname(this.file));
    } catch {
      return false;
    }
  }

  private fileEvent(): void {
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      const text = readText(this.file);
      // a file missing for a moment (replaced by rename) is read again at the next event
      if (text === undefined || hashOf(text) === this.lastHash) return;
      this.trigger('file change');
    }, DEBOUNCE_MS);
    this.debounce.unref();
  }

  private trigger(why: ReloadTrigger): void {
    if (this.stopped) return;
    if (this.running) {
      this.queued = why;
      return;
    }
    this.running = this.reloadOnce(why)
      .catch((err: unknown) => {
        this.opts.logger.error({ err, trigger: why }, 'config reload failed');
        this.opts.gateway.metrics.configReloads.inc({ result: 'error' });
      })
      .finally(() => {
        this.running = undefined;
        const next = this.queued;
        this.queued = undefined;
        if (next) this.trigger(next);
      });
  }

  private async reloadOnce(trigger: ReloadTrigger): Promise<void> {
    const { gateway, logger } = this.opts;
    const counter = gateway.metrics.configReloads;
    const t0 = performance.now();
    const text = readText(this.file);
    if (text !== undefined) this.lastHash = hashOf(text);
    let next: Config;
    try {
      const checked = loadConfigChecked(this.file);
      next = checked.config;
      for (const w of checked.warnings) logger.warn({ trigger, file: this.file, line: w.line, key: w.path }, formatProblems(this.file, [w], 'warning'));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const p of err.problems) {
        logger.error({ trigger, file: this.file, line: p.line, key: p.path || undefined }, `config reload refused, nothing changed: ${formatProblems(this.file, [p])}`);
      }
      counter.inc({ result: 'error' });
      return;
    }
    let outcome: ReloadOutcome;
    try {
      outcome = await gateway.reload(next);
    } catch (err) {
      logger.error({ trigger, file: this.file, err: (err as Error).message }, `config reload refused, nothing changed: ${(err as Error).message}`);
      counter.inc({ result: 'error' });
      return;
    }
    const level = gateway.config.logging.level;
    if (!this.opts.levelFromEnv && logger.level !== level) logger.level = level;
    this.setWatching(gateway.config.admin.watch_config);
    if (outcome.needsRestart.length > 0) {
      logger.warn(
        { trigger, file: this.file, keys: outcome.needsRestart },
        `config reload: needs restart for ${outcome.needsRestart.join(', ')} (kept at their running values; the rest is applied)`,
      );
    }
    counter.inc({ result: outcome.needsRestart.length > 0 ? 'needs_restart' : 'success' });
    const ms = Math.round((performance.now() - t0) * 10) / 10;
    logger.info({ trigger, file: this.file, generation: outcome.generation, changed: outcome.changed, ms }, `config reloaded (${trigger})`);
  }
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function hashOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
