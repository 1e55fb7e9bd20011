/**
 * Certificate reload for the TLS listener, on SIGHUP and when the certificate or key file changes.
 *
 * uWS cannot swap the certificate of a listening app, so the front makes a new app with the new pair and
 * the same routes, listens with it on the same port and closes the old app's listening socket
 * (Front.reloadTls): new connections get the new certificate, open ones (a stream under way) finish on
 * the old one. A pair that cannot be used (unreadable, not PEM, a key that is not the certificate's)
 * changes nothing: the old certificate keeps serving, the reason is logged and counted.
 *
 * The files are watched through their directories (an editor, `mv`, cert-manager and Kubernetes
 * secret volumes replace a file rather than write into it, which a watch on the file itself misses);
 * events are gathered for DEBOUNCE_MS, then the files' contents are compared with what is being served,
 * so a touch or an unrelated file in the directory reloads nothing. SIGHUP reloads when the contents
 * changed too. This module adds its own SIGHUP listener and removes it on close; others may listen as well.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

/** The events of one replacement (key and certificate written one after the other) land in one reload. */
export const DEBOUNCE_MS = 300;

export interface TlsReloadOptions {
  cert: string;
  key: string;
  /** watch the files' directories (SIGHUP works either way) */
  watch: boolean;
  /**
   * serve new connections with the pair; throws when it cannot (nothing changed then); resolves once no
   * new connection gets the previous pair any more
   */
  apply(pair: { cert: string; key: string }): Promise<void>;
  /** told of each attempt that found changed contents (of a success once it is complete: see apply) */
  onResult(result: 'reloaded' | 'failed', why: 'signal' | 'file_change', detail: { fingerprint?: string; error?: string }): void;
}

export class TlsReloader {
  private served: string;
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly onSignal = () => this.check('signal');

  constructor(private readonly opts: TlsReloadOptions) {
    this.served = contentsHash(opts.cert, opts.key) ?? '';
    process.on('SIGHUP', this.onSignal);
    if (opts.watch) {
      const names = new Map<string, Set<string>>();
      for (const f of [opts.cert, opts.key]) {
        const dir = dirname(resolve(f));
        if (!names.has(dir)) names.set(dir, new Set());
        names.get(dir)!.add(basename(f));
      }
      for (const [dir, files] of names) {
        const w = watch(dir, { persistent: false }, (_event, name) => {
          // Kubernetes swaps a `..data` link that the files point through: any name but an unrelated file counts
          if (name === null || files.has(name.toString()) || name.toString().startsWith('..')) this.soon();
        });
        w.on('error', () => undefined); // the directory went away: SIGHUP still works
        this.watchers.push(w);
      }
    }
  }

  private soon(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.check('file_change');
    }, DEBOUNCE_MS);
    this.timer.unref();
  }

  /** Reloads when the files' contents differ from what is served (whatever the outcome, tried once per change). */
  private check(why: 'signal' | 'file_change'): void {
    try {
      const now = contentsHash(this.opts.cert, this.opts.key);
      if (now !== undefined && now === this.served) return;
      let complete: Promise<void>;
      try {
        complete = this.opts.apply({ cert: this.opts.cert, key: this.opts.key });
      } catch (err) {
        if (now !== undefined) this.served = now; // the same broken pair is not retried until it changes again
        this.opts.onResult('failed', why, { error: err instanceof Error ? err.message : String(err) });
        return;
      }
      this.served = now ?? '';
      const fingerprint = fingerprintOf(this.opts.cert);
      complete
        .then(() => this.opts.onResult('reloaded', why, { fingerprint }))
        .catch(() => undefined);
    } catch {
      // nothing thrown here may reach the signal or watch callback (the process would exit)
    }
  }

  close(): void {
    process.off('SIGHUP', this.onSignal);
    if (this.timer) clearTimeout(this.timer);
    for (const w of this.watchers) w.close();
    this.watchers.length = 0;
  }
}

/** The pair's contents as one hash, or undefined when a file cannot be read. */
function contentsHash(cert: string, key: string): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(cert)).update('\0').update(readFileSync(key)).digest('hex');
  } catch {
    return undefined;
  }
}

/** The certificate's SHA-256 fingerprint (AB:CD:…), for the log. */
function fingerprintOf(file: string): string | undefined {
  try {
    return new X509Certificate(readFileSync(file)).fingerprint256;
  } catch {
    return undefined;
  }
}
