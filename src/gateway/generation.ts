/**
 * A config generation: what a request reads of the config, fixed for its whole life. The gateway holds
 * one current generation and swaps it on a reload (reload.ts); each exchange is given a context bound to
 * the generation current when it started, so a request in flight finishes on the config, pool keys,
 * sticky headers, trusted proxies and authenticator it started with. What is shared and live (the
 * router with its prefix index and signals, the upstream pools, metrics, the logger, quotas, the drain
 * state, the in-flight count) is read through to the gateway.
 */
import type { Config } from '../config/schema.js';
import { addressMatcher } from '../common/ip.js';
import type { Admission } from './admission.js';
import type { GatewayContext } from './context.js';
import type { ClientSide } from './client.js';

export interface Generation {
  /** 1 for the config the gateway started with, +1 per applied reload */
  readonly id: number;
  readonly config: Config;
  /** pool → the key sent upstream (api_key_file / api_key_env, read when the generation was built) */
  readonly poolKeys: ReadonlyMap<string, string>;
  readonly stickyHeaders: ReadonlySet<string>;
  readonly isTrustedProxy: (peer: string) => boolean;
  readonly admission: Admission;
}

/** The parts of a generation that follow from the config alone. */
export function generationOf(id: number, config: Config, poolKeys: ReadonlyMap<string, string>, admission: Admission): Generation {
  return {
    id,
    config,
    poolKeys,
    stickyHeaders: new Set(config.models.flatMap((m) => (m.sticky ? [m.sticky.header.toLowerCase()] : []))),
    isTrustedProxy: addressMatcher(config.trusted_proxies),
    admission,
  };
}

/** A GatewayContext whose per-generation parts are `gen`'s, the rest read through to `live`. */
export class GenerationContext implements GatewayContext {
  readonly config: Config;
  readonly poolKeys: ReadonlyMap<string, string>;
  readonly stickyHeaders: ReadonlySet<string>;
  readonly admission: Admission;
  readonly isTrustedProxy: (peer: string) => boolean;

  constructor(
    private readonly live: GatewayContext,
    readonly gen: Generation,
  ) {
    this.config = gen.config;
    this.poolKeys = gen.poolKeys;
    this.stickyHeaders = gen.stickyHeaders;
    this.admission = gen.admission;
    this.isTrustedProxy = gen.isTrustedProxy;
  }

  get router() {
    return this.live.router;
  }
  get upstreams() {
    return this.live.upstreams;
  }
  get metrics() {
    return this.live.metrics;
  }
  get logger() {
    return this.live.logger;
  }
  get quota() {
    return this.live.quota;
  }
  get scheme() {
    return this.live.scheme;
  }
  get decisions() {
    return this.live.decisions;
  }
  get retryBudgets() {
    return this.live.retryBudgets;
  }
  get bodies() {
    return this.live.bodies;
  }
  get responseAffinity() {
    return this.live.responseAffinity;
  }
  get cors() {
    return this.live.cors;
  }
  get tracing() {
    return this.live.tracing;
  }
  get flow() {
    return this.live.flow;
  }
  get draining() {
    return this.live.draining;
  }
  get inFlight() {
    return this.live.inFlight;
  }
  set inFlight(n: number) {
    this.live.inFlight = n;
  }
  onExchangeDone(ex: { readonly client: ClientSide }): void {
    this.live.onExchangeDone(ex);
  }
}
