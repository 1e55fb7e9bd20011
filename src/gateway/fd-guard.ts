/**
 * The process's open-file limit, and a guard for when it is reached anyway.
 *
 * Every client connection is a file descriptor, and every proxied request another one upstream. uWS 20.30
 * accepts connections as long as the kernel gives it descriptors and tells JavaScript nothing about a
 * connection before its first request; at the limit its accept fails with EMFILE while the listen socket
 * stays readable, so its loop spins (most of a core) and nothing else gets a descriptor: not the admin
 * port, not the upstream connections. `limits.max_connections` keeps requests in progress well under the
 * limit; connections that never send a request are what the guard is for: it holds a few spare
 * descriptors, and when a probe finds none left it stops accepting on the client port (new connections
 * are refused by the kernel) and frees its spares for the admin port and the upstreams, then listens
 * again once descriptors are free.
 *
 * Node raises its soft RLIMIT_NOFILE to the hard limit when it starts (it has no setrlimit for us to
 * call), so the limit read here is the hard one unless something lowered both.
 */
import { closeSync, openSync, readFileSync } from 'node:fs';

/** The soft limit on open files from /proc/self/limits, or undefined where there is no such file. */
export function openFileLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!m) return undefined;
    return m[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(m[1]);
  } catch {
    return undefined;
  }
}

/** Descriptors not counted for client connections: the admin port, logs, undici's idle pool, the guard's. */
export const FD_HEADROOM = 128;
/** With no configured bound, and no limit to read, this many requests in progress. */
const FALLBACK_MAX_CONNECTIONS = 4096;

/**
 * The bound on client requests in progress: the configured one, or half of what the open-file limit
 * leaves after the headroom (each proxied request holds a client and an upstream descriptor). `warning`
 * says when a configured bound is above that.
 */
export function connectionBound(configured: number | undefined, fdLimit: number | undefined): { max: number; warning?: string } {
  const safe = fdLimit === undefined ? undefined : Math.max(1, Math.floor((fdLimit - FD_HEADROOM) / 2));
  if (configured === undefined) return { max: safe ?? FALLBACK_MAX_CONNECTIONS };
  if (safe !== undefined && configured > safe) {
    return {
      max: configured,
      warning:
        `limits.max_connections is ${configured}, but the open-file limit (${fdLimit}) leaves room for about ${safe} ` +
        'proxied requests (a client and an upstream connection each); raise it (ulimit -n, LimitNOFILE=, docker --ulimit nofile=) or lower max_connections',
    };
  }
  return { max: configured };
}

const NULL_DEVICE = '/dev/null';

function outOfDescriptors(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'EMFILE' || code === 'ENFILE';
}

export interface FdGuardEvents {
  /** no descriptor was left: stop accepting on the client port */
  onExhausted(): void;
  /** descriptors are free again: accept again (false: not possible now, asked again at the next check) */
  onRecovered(): boolean;
}

/**
 * Checks every `intervalMs` (one open and close of /dev/null) whether a descriptor is left; holds
 * `spares` descriptors that it gives up when none is, so that the admin port can still accept.
 */
export class FdGuard {
  private spares: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  exhausted = false;

  constructor(
    private readonly events: FdGuardEvents,
    private readonly spareCount = 16,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    this.spares = this.openSpares(this.spareCount) ?? [];
    this.timer = setInterval(() => this.check(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.release(this.spares);
    this.spares = [];
  }

  /** One probe (also called by the timer). */
  check(): void {
    if (!this.exhausted) {
      try {
        closeSync(openSync(NULL_DEVICE, 'r'));
        return;
      } catch (err) {
        if (!outOfDescriptors(err)) return;
      }
      this.exhausted = true;
      this.release(this.spares);
      this.spares = [];
      this.events.onExhausted();
      return;
    }
    // Recovered when twice the spares can be opened: the spares are kept, the rest is room to accept in.
    const room = this.openSpares(this.spareCount * 2);
    if (room === undefined) return;
    this.release(room.splice(this.spareCount));
    if (!this.events.onRecovered()) {
      this.release(room);
      return;
    }
    this.spares = room;
    this.exhausted = false;
  }

  /** `n` descriptors, or undefined (and none kept) when the process cannot open that many. */
  private openSpares(n: number): number[] | undefined {
    const fds: number[] = [];
    try {
      while (fds.length < n) fds.push(openSync(NULL_DEVICE, 'r'));
      return fds;
    } catch {
      this.release(fds);
      return undefined;
    }
  }

  private release(fds: number[]): void {
    for (const fd of fds) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    }
  }
}
