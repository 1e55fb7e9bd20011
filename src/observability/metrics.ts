/**
 * The gateway's Prometheus metrics (prom-client). One registry per gateway instance, so that tests and
 * the demo can run several in one process. Names are part of the user contract (shared/spec/README.md).
 */
import client from 'prom-client';
import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from './histogram.js';
import { infergateVersion } from '../common/version.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];
const ITL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5];
const RATIO_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];
const PICK_BUCKETS = [0.000001, 0.0000025, 0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.00025, 0.001, 0.005];

/** One endpoint as the gauges read it (the router's debug view has these fields and more). */
export interface EndpointView {
  endpoint: string;
  signals: { waiting: number; running: number; kvUsage: number } | null;
  age_ms: number | null;
  stale: boolean;
  in_flight: number;
  waiting_estimate: number;
  saturated: boolean;
  eligible: boolean;
  ejected_for_ms?: number;
}

export interface PoolView {
  pool: string;
  endpoints: readonly EndpointView[];
}

export interface EndpointGaugeSource {
  /** Each pool and its endpoints, read when /metrics is scraped. */
  pools(): PoolView[];
  /** bytes held by request bodies being received (all connections) */
  bufferedBodyBytes?(): number;
  /** client-port connections with a request in progress */
  openConnections?(): number;
  /** Responses API answer ids remembered (response_affinity: relayed here, or told by replicas) */
  storedResponseIds?(): number;
  /** /readyz's answer: the gateway ready, and each configured model ready */
  readiness?(): { ready: boolean; models: ReadonlyArray<{ model: string; ready: boolean }> };
  /** auth.mode none: infergate_auth_disabled is 1 */
  authDisabled?: boolean;
  /** the uWebSockets.js build serving ("20.57"), once loaded */
  uwsVersion?(): string | undefined;
  /** requests waiting in each pool's flow-control queue, per priority class */
  queues?(): ReadonlyArray<{ pool: string; priority: string; length: number }>;
}

/** The series of one (model, pool) the hot path touches (token counters made at the first usage). */
interface ModelSeries {
  ttft: HistogramSeries;
  itl: HistogramSeries;
  prompt: CounterSeries | undefined;
  completion: CounterSeries | undefined;
  byCode: Map<number, { count: CounterSeries; duration: HistogramSeries }>;
}

/** One endpoint's series (per pool): answers by status code, and its TTFT once a first byte came. */
interface EndpointSeries {
  ttft: HistogramSeries | undefined;
  byCode: Map<number, CounterSeries>;
}

/** infergate's own version (package.json's, or the one built into the single executable). */
const VERSION = infergateVersion();

export class GatewayMetrics {
  readonly registry = new client.Registry();
  readonly requests: FastCounter<'model' | 'pool' | 'code'>;
  // the histograms observed per request or per chunk: our own (histogram.ts), in the same registry
  readonly ttft: FastHistogram<'model' | 'pool'>;
  readonly itl: FastHistogram<'model' | 'pool'>;
  readonly duration: FastHistogram<'model' | 'pool' | 'code'>;
  /** `priority`: the request's class once known ('' before: a refusal from the head or the token) */
  readonly rejected: client.Counter<'reason' | 'pool' | 'priority'>;
  /** how long requests waited in a pool's flow-control queue, per class (observed as each leaves it) */
  readonly queueWait: client.Histogram<'pool' | 'priority' | 'outcome'>;
  readonly upstreamErrors: client.Counter<'pool' | 'kind'>;
  readonly retries: client.Counter<'pool' | 'reason'>;
  readonly retryBudgetExhausted: client.Counter<'pool'>;
  readonly ejections: client.Counter<'pool' | 'endpoint' | 'reason'>;
  readonly ejectionsHeldBack: client.Counter<'pool' | 'endpoint'>;
  readonly tokens: FastCounter<'model' | 'pool' | 'kind'>;
  readonly audioSeconds: client.Counter<'model' | 'pool'>;
  readonly pickDuration: FastHistogram<'pool' | 'policy'>;
  readonly configReloads: client.Counter<'result'>;
  /** infergate_auth_disabled (set again when a reload changes auth.mode) */
  readonly authDisabled: client.Gauge;
  readonly tlsReloads: client.Counter<'result' | 'trigger'>;
  readonly shadowPicks: client.Counter<'pool' | 'policy' | 'outcome'>;
  /** Responses API follow-ups (previous_response_id) by what the gateway did with them (response-affinity.ts) */
  readonly responseAffinity: client.Counter<'pool' | 'outcome'>;
  /** retrieves and cancels of stored Responses API answers, by what the gateway did with them */
  readonly storedResponseCalls: client.Counter<'pool' | 'op' | 'outcome'>;
  /** 1 while the tenant quota's store answers (always 1 with quota.backend: memory), 0 while it does not */
  readonly quotaBackendUp: client.Gauge;
  // per endpoint (a bounded set: endpoints come from the config or discovery; removed ones are dropped)
  readonly endpointRequests: FastCounter<'pool' | 'endpoint' | 'code'>;
  readonly endpointTtft: FastHistogram<'pool' | 'endpoint'>;
  readonly prefixMatch: FastHistogram<'pool'>;

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

  /**
   * The hot path's series of one (model, pool), found with two map lookups and no key string built
   * (building `model\0pool\0code` per request showed in CPU profiles).
   */
  private modelSeries(model: string, pool: string): ModelSeries {
    let byModel = this.byPool.get(pool);
    if (byModel === undefined) this.byPool.set(pool, (byModel = new Map()));
    let m = byModel.get(model);
    if (m === undefined) {
      m = {
        ttft: this.ttft.labels(model, pool),
        itl: this.itl.labels(model, pool),
        prompt: undefined,
        completion: undefined,
        byCode: new Map(),
      };
      byModel.set(model, m);
    }
    return m;
  }

  private readonly byPool = new Map<string, Map<string, ModelSeries>>();
  private readonly byEndpoint = new Map<string, Map<string, EndpointSeries>>();
  private readonly pickSeries = new Map<string, Map<string, HistogramSeries>>();

  /** Per (model, pool): the TTFT and ITL series of the hot path. */
  streamSeries(model: string, pool: string): { ttft: HistogramSeries; itl: HistogramSeries } {
    return this.modelSeries(model, pool);
  }

  /** Counts one finished request and its duration. */
  requestDone(model: string, pool: string, code: number, seconds: number): void {
    const m = this.modelSeries(model, pool);
    let c = m.byCode.get(code);
    if (c === undefined) {
      c = { count: this.requests.labels(model, pool, String(code)), duration: this.duration.labels(model, pool, String(code)) };
      m.byCode.set(code, c);
    }
    c.count.inc();
    c.duration.observe(seconds);
  }

  /** The tokens of one answer, from its `usage` (prompt and completion). */
  tokensUsed(model: string, pool: string, prompt: number, completion: number): void {
    const m = this.modelSeries(model, pool);
    if (prompt > 0) (m.prompt ??= this.tokens.labels(model, pool, 'prompt')).inc(prompt);
    if (completion > 0) (m.completion ??= this.tokens.labels(model, pool, 'completion')).inc(completion);
  }

  shadowPick(pool: string, policy: string, outcome: string): void {
    this.child(`h\0${pool}\0${policy}\0${outcome}`, () => this.shadowPicks.labels(pool, policy, outcome)).inc();
  }

  /** The request's last endpoint: its answer's status and, when a first byte came, its time to it. */
  endpointDone(pool: string, endpoint: string, code: number, ttftSeconds: number | null): void {
    let byEndpoint = this.byEndpoint.get(pool);
    if (byEndpoint === undefined) this.byEndpoint.set(pool, (byEndpoint = new Map()));
    let e = byEndpoint.get(endpoint);
    if (e === undefined) byEndpoint.set(endpoint, (e = { ttft: undefined, byCode: new Map() }));
    let c = e.byCode.get(code);
    if (c === undefined) e.byCode.set(code, (c = this.endpointRequests.labels(pool, endpoint, String(code))));
    c.inc();
    if (ttftSeconds !== null) (e.ttft ??= this.endpointTtft.labels(pool, endpoint)).observe(ttftSeconds);
  }

  /** Share of the prompt's prefix blocks the chosen endpoint already held (0..1), per pick. */
  prefixMatchObserved(pool: string, ratio: number): void {
    this.child(`m\0${pool}`, () => this.prefixMatch.labels(pool)).observe(ratio);
  }

  /** The router ejected an endpoint, or its pool's max_ejection_percent held the ejection back. */
  ejection(pool: string, endpoint: string, outcome: 'ejected' | 'held_back'): void {
    if (outcome === 'ejected') this.child(`j\0${pool}\0${endpoint}`, () => this.ejections.labels(pool, endpoint, 'consecutive_errors')).inc();
    else this.child(`k\0${pool}\0${endpoint}`, () => this.ejectionsHeldBack.labels(pool, endpoint)).inc();
  }

  /** Drops the per-endpoint series of endpoints no longer in any pool (discovery churn stays bounded). */
  retainEndpoints(endpoints: ReadonlySet<string>): void {
    for (const [pool, byEndpoint] of this.byEndpoint) {
      for (const [endpoint, e] of byEndpoint) {
        if (endpoints.has(endpoint)) continue;
        byEndpoint.delete(endpoint);
        for (const code of e.byCode.keys()) this.endpointRequests.remove(pool, endpoint, String(code));
        if (e.ttft) this.endpointTtft.remove(pool, endpoint);
      }
    }
    for (const key of [...this.children.keys()]) {
      const parts = key.split('\0');
      if ((parts[0] !== 'j' && parts[0] !== 'k') || endpoints.has(parts[2])) continue;
      this.children.delete(key);
      if (parts[0] === 'j') this.ejections.remove(parts[1], parts[2], 'consecutive_errors');
      else this.ejectionsHeldBack.remove(parts[1], parts[2]);
    }
  }

  /** The source's pools, read once per scrape (every gauge below reads the same snapshot). */
  private poolViews(): PoolView[] {
    const now = Date.now();
    if (this.viewsAt === undefined || now - this.viewsAt > 50) {
      this.views = this.source.pools();
      this.viewsAt = now;
    }
    return this.views;
  }

  private views: PoolView[] = [];
  private viewsAt: number | undefined;

  pickObserved(pool: string, policy: string, seconds: number): void {
    let byPolicy = this.pickSeries.get(pool);
    if (byPolicy === undefined) this.pickSeries.set(pool, (byPolicy = new Map()));
    let s = byPolicy.get(policy);
    if (s === undefined) byPolicy.set(policy, (s = this.pickDuration.labels(pool, policy)));
    s.observe(seconds);
  }

  constructor(
    private readonly source: EndpointGaugeSource,
    opts: { processMetrics?: boolean } = {},
  ) {
    const registers = [this.registry];
    // Node's standard names (process_*, nodejs_*), so that the usual Node.js dashboards work as they are
    if (opts.processMetrics !== false) client.collectDefaultMetrics({ register: this.registry });
    const views = () => this.poolViews();
    this.requests = new FastCounter('infergate_requests_total', 'Requests answered, by model, pool and HTTP status code.', ['model', 'pool', 'code'], registers);
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
      name: 'infergate_rejected_total', help: 'Requests refused by the gateway itself, by reason (and priority class, once known).',
      labelNames: ['reason', 'pool', 'priority'], registers,
    });
    this.queueWait = new client.Histogram({
      name: 'infergate_queue_wait_seconds',
      help: 'Time requests spent in a pool\'s flow-control queue, by class and how they left it (dispatched, expired, evicted, client_gone, shutdown).',
      labelNames: ['pool', 'priority', 'outcome'], buckets: LATENCY_BUCKETS, registers,
    });
    new client.Gauge({
      name: 'infergate_queue_length',
      help: 'Requests waiting in each pool\'s flow-control queue, by priority class.',
      labelNames: ['pool', 'priority'], registers,
      collect() {
        this.reset();
        for (const q of source.queues?.() ?? []) this.set({ pool: q.pool, priority: q.priority }, q.length);
      },
    });
    this.upstreamErrors = new client.Counter({
      name: 'infergate_upstream_errors_total', help: 'Failed tries against model servers, by kind (connect, timeout, status, stream).',
      labelNames: ['pool', 'kind'], registers,
    });
    this.retries = new client.Counter({
      name: 'infergate_retries_total',
      help: 'Requests sent again to another endpoint, by why the try before failed: connect (no connection), reset (closed before any answer byte), status (502/503).',
      labelNames: ['pool', 'reason'], registers,
    });
    this.retryBudgetExhausted = new client.Counter({
      name: 'infergate_retry_budget_exhausted_total',
      help: 'Retries not made because the pool\'s retry_budget was spent (the client got the failed try\'s answer).',
      labelNames: ['pool'], registers,
    });
    this.ejections = new client.Counter({
      name: 'infergate_ejections_total',
      help: 'Endpoints taken out of the picks for a while, by reason (consecutive_errors: upstream failures in a row).',
      labelNames: ['pool', 'endpoint', 'reason'], registers,
    });
    this.ejectionsHeldBack = new client.Counter({
      name: 'infergate_ejections_held_back_total',
      help: 'Ejections not made because the pool already had max_ejection_percent of its endpoints ejected.',
      labelNames: ['pool', 'endpoint'], registers,
    });
    this.tokens = new FastCounter(
      'infergate_tokens_total',
      'Tokens of answered requests as the model server\'s usage reports them, by model (as the client named it), pool and kind (prompt, completion).',
      ['model', 'pool', 'kind'], registers,
    );
    this.audioSeconds = new client.Counter({
      name: 'infergate_audio_seconds_total',
      help: 'Seconds of audio in answered speech-to-text requests (/v1/audio/*) as the model server\'s usage reports them, by model (as the client named it) and pool.',
      labelNames: ['model', 'pool'], registers,
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
    this.tlsReloads = new client.Counter({
      name: 'infergate_tls_reloads_total',
      help: 'Reloads of the listener\'s TLS certificate and key after they changed, by result (reloaded, failed: the old pair kept serving) and trigger (signal, file_change).',
      labelNames: ['result', 'trigger'], registers,
    });
    this.shadowPicks = new client.Counter({
      name: 'infergate_shadow_picks_total',
      help: 'Decisions of a pool\'s shadow_policy next to the serving one: same or different endpoint (or saturated/unavailable).',
      labelNames: ['pool', 'policy', 'outcome'], registers,
    });
    this.responseAffinity = new client.Counter({
      name: 'infergate_response_affinity_total',
      help: 'Responses API requests with a previous_response_id, by outcome: pinned (sent to the endpoint that served that answer), gone (that endpoint is removed, ejected or failed this request: routed normally), unknown (an id this gateway did not relay or has forgotten: routed normally), other_tenant (an answer it relayed for another tenant: 404, no server asked).',
      labelNames: ['pool', 'outcome'], registers,
    });
    this.storedResponseCalls = new client.Counter({
      name: 'infergate_stored_response_requests_total',
      help: 'Retrieves (GET /v1/responses/{id}) and cancels (POST /v1/responses/{id}/cancel) of stored Responses API answers, by op and outcome: pinned (sent to the endpoint that stored the answer), gone (that endpoint is removed or ejected: 502 without asking another), unknown (an id this gateway did not relay for this tenant or has forgotten: 404, no server asked).',
      labelNames: ['pool', 'op', 'outcome'], registers,
    });
    this.quotaBackendUp = new client.Gauge({
      name: 'infergate_quota_backend_up',
      help: 'Whether the tenant quota store (quota.backend) answers: 1 yes, 0 no (quota.on_backend_error applies meanwhile).',
      registers,
    });
    this.quotaBackendUp.set(1);
    new client.Gauge({
      name: 'infergate_request_body_buffered_bytes',
      help: 'Bytes held by request bodies, all connections together: those being received and those of requests in flight (bounded by limits.max_buffered_body_bytes).',
      registers,
      collect() {
        this.set(source.bufferedBodyBytes?.() ?? 0);
      },
    });
    this.endpointRequests = new FastCounter(
      'infergate_endpoint_requests_total',
      'Requests answered, by the endpoint that served the last try, pool and HTTP status code.',
      ['pool', 'endpoint', 'code'], registers,
    );
    this.endpointTtft = new FastHistogram(
      'infergate_endpoint_time_to_first_token_seconds',
      'From request received to the first byte of the answer body, by the endpoint that served it.',
      ['pool', 'endpoint'], LATENCY_BUCKETS, registers,
    );
    this.prefixMatch = new FastHistogram(
      'infergate_prefix_match_ratio',
      'Per pick: the share of the prompt\'s prefix blocks the chosen endpoint already held (recorded while admin.decisions > 0).',
      ['pool'], RATIO_BUCKETS, registers,
    );
    endpointGauge('infergate_endpoint_in_flight', 'Requests the gateway has in flight on each endpoint.', (e) => e.in_flight);
    endpointGauge('infergate_endpoint_metrics_age_seconds', 'Age of the last metrics scraped from each endpoint.', (e) =>
      e.age_ms === null ? undefined : e.age_ms / 1000,
    );
    endpointGauge('infergate_endpoint_queue_waiting', 'Requests waiting on each endpoint, as it last reported (absent when never scraped).', (e) =>
      e.signals?.waiting,
    );
    endpointGauge('infergate_endpoint_running', 'Requests running on each endpoint, as it last reported.', (e) => e.signals?.running);
    endpointGauge('infergate_endpoint_kv_cache_usage_ratio', 'KV-cache use of each endpoint (0..1), as it last reported.', (e) =>
      e.signals?.kvUsage,
    );
    endpointGauge('infergate_endpoint_stale', '1 when an endpoint\'s metrics are older than stale_after (or never came), else 0.', (e) =>
      e.stale ? 1 : 0,
    );
    endpointGauge('infergate_endpoint_eligible', '1 when the picker may choose the endpoint (not ejected, not saturated), else 0.', (e) =>
      e.eligible ? 1 : 0,
    );
    endpointGauge('infergate_endpoint_ejected', '1 while an endpoint is ejected after errors, else 0.', (e) => (e.ejected_for_ms ? 1 : 0));
    poolGauge('infergate_pool_endpoints', 'Endpoints configured or discovered in each pool.', (p) => p.endpoints.length);
    poolGauge('infergate_pool_eligible_endpoints', 'Endpoints of each pool the picker may choose now.', (p) =>
      p.endpoints.filter((e) => e.eligible).length,
    );
    poolGauge('infergate_pool_queue_waiting', 'Requests waiting in each pool (sum of the endpoints\' estimates: reported plus sent since).', (p) =>
      p.endpoints.reduce((a, e) => a + e.waiting_estimate, 0),
    );
    poolGauge('infergate_pool_in_flight', 'Requests the gateway has in flight on each pool.', (p) => p.endpoints.reduce((a, e) => a + e.in_flight, 0));
    poolGauge('infergate_pool_saturated', '1 when every endpoint of the pool is saturated (new requests get 429), else 0.', (p) =>
      p.endpoints.length > 0 && p.endpoints.every((e) => e.saturated) ? 1 : 0,
    );
    new client.Gauge({
      name: 'infergate_build_info',
      help: 'Always 1; the labels say which infergate, Node and uWebSockets.js build are running.',
      labelNames: ['version', 'node', 'uws'], registers,
      collect() {
        this.reset();
        this.set({ version: VERSION, node: process.versions.node, uws: source.uwsVersion?.() ?? 'none' }, 1);
      },
    });
    this.authDisabled = new client.Gauge({
      name: 'infergate_auth_disabled',
      help: '1 when auth.mode is none (every client may use every model), 0 when tokens are checked.',
      registers,
    });
    this.authDisabled.set(source.authDisabled ? 1 : 0);
    new client.Gauge({
      name: 'infergate_open_connections',
      help: 'Client-port connections with a request in progress (bounded by limits.max_connections).',
      registers,
      collect() {
        this.set(source.openConnections?.() ?? 0);
      },
    });
    new client.Gauge({
      name: 'infergate_response_affinity_entries',
      help: 'Responses API answer ids the gateway remembers with the endpoint that keeps each (response_affinity: relayed here, or told by replicas and sibling workers); at most response_affinity.max_entries.',
      registers,
      collect() {
        this.set(source.storedResponseIds?.() ?? 0);
      },
    });
    new client.Gauge({
      name: 'infergate_ready', help: '1 when /readyz answers 200 (see admin.ready_when), else 0.', registers,
      collect() {
        const r = source.readiness?.();
        if (r) this.set(r.ready ? 1 : 0);
      },
    });
    new client.Gauge({
      name: 'infergate_model_ready', help: '1 when a configured model has an endpoint to serve it, else 0.',
      labelNames: ['model'], registers,
      collect() {
        this.reset();
        for (const m of source.readiness?.().models ?? []) this.set({ model: m.model }, m.ready ? 1 : 0);
      },
    });

    function endpointGauge(name: string, help: string, value: (e: EndpointView) => number | undefined): void {
      new client.Gauge({
        name, help, labelNames: ['pool', 'endpoint'], registers,
        collect() {
          this.reset();
          for (const p of views()) {
            for (const e of p.endpoints) {
              const v = value(e);
              if (v !== undefined && Number.isFinite(v)) this.set({ pool: p.pool, endpoint: e.endpoint }, v);
            }
          }
        },
      });
    }
    function poolGauge(name: string, help: string, value: (p: PoolView) => number): void {
      new client.Gauge({
        name, help, labelNames: ['pool'], registers,
        collect() {
          this.reset();
          for (const p of views()) this.set({ pool: p.pool }, value(p));
        },
      });
    }
  }
}
