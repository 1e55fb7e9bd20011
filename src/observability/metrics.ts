/**
 * The gateway's Prometheus metrics (prom-client). One registry per gateway instance, so that tests and
 * the demo can run several in one process. Names are part of the user contract (shared/spec/README.md).
 */
import client from 'prom-client';
import { FastHistogram, type HistogramSeries } from './histogram.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];
const ITL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5];
const PICK_BUCKETS = [0.000001, 0.0000025, 0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.00025, 0.001, 0.005];

export interface EndpointGaugeSource {
  /** [pool, endpoint, inFlight, metricsAgeSeconds (NaN when never scraped)] for each endpoint. */
  endpointStates(): Array<[string, string, number, number]>;
  /** bytes held by request bodies being received (all connections) */
  bufferedBodyBytes?(): number;
  /** client-port connections with a request in progress */
  openConnections?(): number;
}

export class GatewayMetrics {
  readonly registry = new client.Registry();
  readonly requests: client.Counter<'model' | 'pool' | 'code'>;
  // the histograms observed per request or per chunk: our own (histogram.ts), in the same registry
  readonly ttft: FastHistogram<'model' | 'pool'>;
  readonly itl: FastHistogram<'model' | 'pool'>;
  readonly duration: FastHistogram<'model' | 'pool' | 'code'>;
  readonly rejected: client.Counter<'reason' | 'pool'>;
  readonly upstreamErrors: client.Counter<'pool' | 'kind'>;
  readonly retries: client.Counter<'pool'>;
  readonly pickDuration: FastHistogram<'pool' | 'policy'>;
  readonly configReloads: client.Counter<'result'>;
  readonly shadowPicks: client.Counter<'pool' | 'policy' | 'outcome'>;

  /** Label children looked up once per label set: prom-client hashes the label object on every call otherwise. */
  private readonly children = new Map<string, unknown>();

  private child<T>(key: string, make: () => T): T {
    let c = this.children.get(key) as T | undefined;
    if (c === undefined) {
      c = make();
      this.children.set(key, c);
    }
    return c;
  }

  /** Per (model, pool): the TTFT and ITL series of the hot path. */
  streamSeries(model: string, pool: string): { ttft: HistogramSeries; itl: HistogramSeries } {
    return this.child(`s\0${model}\0${pool}`, () => ({ ttft: this.ttft.labels(model, pool), itl: this.itl.labels(model, pool) }));
  }

  /** Counts one finished request and its duration. */
  requestDone(model: string, pool: string, code: number, seconds: number): void {
    const c = this.child(`r\0${model}\0${pool}\0${code}`, () => {
      return { count: this.requests.labels({ model, pool, code: String(code) }), duration: this.duration.labels(model, pool, String(code)) };
    });
    c.count.inc();
    c.duration.observe(seconds);
  }

  shadowPick(pool: string, policy: string, outcome: string): void {
    this.child(`h\0${pool}\0${policy}\0${outcome}`, () => this.shadowPicks.labels(pool, policy, outcome)).inc();
  }

  pickObserved(pool: string, policy: string, seconds: number): void {
    this.child(`p\0${pool}\0${policy}`, () => this.pickDuration.labels(pool, policy)).observe(seconds);
  }

  constructor(source: EndpointGaugeSource, opts: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (opts.processMetrics !== false) client.collectDefaultMetrics({ register: this.registry, prefix: 'infergate_' });
    this.requests = new client.Counter({
      name: 'infergate_requests_total', help: 'Requests answered, by model, pool and HTTP status code.',
      labelNames: ['model', 'pool', 'code'], registers,
    });
    this.ttft = new FastHistogram(
      'infergate_time_to_first_token_seconds',
      'From request received to the first byte of the model server\'s answer body.',
      ['model', 'pool'], LATENCY_BUCKETS, registers,
    );
    this.itl = new FastHistogram(
      'infergate_inter_token_latency_seconds',
      'Gaps between streamed chunks of an SSE answer (about one token each).',
      ['model', 'pool'], ITL_BUCKETS, registers,
    );
    this.duration = new FastHistogram(
      'infergate_request_duration_seconds',
      'Whole request, from received to the last byte sent.',
      ['model', 'pool', 'code'], LATENCY_BUCKETS, registers,
    );
    this.rejected = new client.Counter({
      name: 'infergate_rejected_total', help: 'Requests refused by the gateway itself, by reason.',
      labelNames: ['reason', 'pool'], registers,
    });
    this.upstreamErrors = new client.Counter({
      name: 'infergate_upstream_errors_total', help: 'Failed tries against model servers, by kind (connect, timeout, status, stream).',
      labelNames: ['pool', 'kind'], registers,
    });
    this.retries = new client.Counter({
      name: 'infergate_retries_total', help: 'Requests sent again to another endpoint after a failure before the first byte.',
      labelNames: ['pool'], registers,
    });
    this.pickDuration = new FastHistogram(
      'infergate_pick_duration_seconds',
      'Time the endpoint picker took for one decision.',
      ['pool', 'policy'], PICK_BUCKETS, registers,
    );
    this.configReloads = new client.Counter({
      name: 'infergate_config_reloads_total', help: 'Configuration reloads, by result.',
      labelNames: ['result'], registers,
    });
    this.shadowPicks = new client.Counter({
      name: 'infergate_shadow_picks_total',
      help: 'Decisions of a pool\'s shadow_policy next to the serving one: same or different endpoint (or saturated/unavailable).',
      labelNames: ['pool', 'policy', 'outcome'], registers,
    });
    new client.Gauge({
      name: 'infergate_endpoint_in_flight', help: 'Requests the gateway has in flight on each endpoint.',
      labelNames: ['pool', 'endpoint'], registers,
      collect() {
        this.reset();
        for (const [pool, endpoint, inFlight] of source.endpointStates()) this.set({ pool, endpoint }, inFlight);
      },
    });
    new client.Gauge({
      name: 'infergate_request_body_buffered_bytes',
      help: 'Bytes held by request bodies being received, all connections together (bounded by limits.max_buffered_body_bytes).',
      registers,
      collect() {
        this.set(source.bufferedBodyBytes?.() ?? 0);
      },
    });
    new client.Gauge({
      name: 'infergate_open_connections',
      help: 'Client-port connections with a request in progress (bounded by limits.max_connections).',
      registers,
      collect() {
        this.set(source.openConnections?.() ?? 0);
      },
    });
    new client.Gauge({
      name: 'infergate_endpoint_metrics_age_seconds', help: 'Age of the last metrics scraped from each endpoint.',
      labelNames: ['pool', 'endpoint'], registers,
      collect() {
        this.reset();
        for (const [pool, endpoint, , age] of source.endpointStates()) {
          if (Number.isFinite(age)) this.set({ pool, endpoint }, age);
        }
      },
    });
  }
}
