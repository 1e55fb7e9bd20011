/**
 * DNS discovery for pools configured with `discovery: { dns, port, interval }`: the name is resolved
 * (A and AAAA, as a Kubernetes headless service answers) every interval, and the pool's endpoints become
 * the addresses found. A failed lookup keeps the last known list, so a DNS hiccup never empties a pool.
 */
import { promises as dns } from 'node:dns';
import type { Config } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import type { Router } from '../routing/index.js';
import { endpointId } from '../config/routing.js';

export class Discovery {
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(
    private readonly config: Config,
    private readonly router: Router,
    private readonly logger: Logger,
    private readonly onChange: () => void,
  ) {}

  /** Resolve every discovered pool once (so readiness is known at start), then keep refreshing. */
  async start(): Promise<void> {
    const pools = Object.entries(this.config.pools).filter(([, p]) => p.discovery);
    await Promise.all(pools.map(([name]) => this.refresh(name)));
    for (const [name, p] of pools) {
      const timer = setInterval(() => void this.refresh(name), p.discovery!.interval);
      timer.unref();
      this.timers.push(timer);
    }
  }

  private async refresh(pool: string): Promise<void> {
    const d = this.config.pools[pool].discovery!;
    const [v4, v6] = await Promise.allSettled([dns.resolve4(d.dns), dns.resolve6(d.dns)]);
    if (this.stopped) return;
    const addrs = [
      ...(v4.status === 'fulfilled' ? v4.value.map((a) => `${a}:${d.port}`) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((a) => `[${a}]:${d.port}`) : []),
    ];
    const fixed = this.config.pools[pool].endpoints.map(endpointId);
    if (addrs.length === 0) {
      const reason = v4.status === 'rejected' ? (v4.reason as Error).message : 'no addresses';
      this.logger.warn({ pool, dns: d.dns, reason }, 'discovery found nothing; keeping the last endpoints');
      return;
    }
    const next = [...new Set([...fixed, ...addrs])].sort();
    const current = [...this.router.endpoints(pool)].sort();
    if (next.join(',') === current.join(',')) return;
    this.logger.info({ pool, endpoints: next }, 'discovery changed the pool');
    this.router.setEndpoints(pool, next);
    this.onChange();
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }
}
