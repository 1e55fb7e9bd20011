/**
 * A Prometheus histogram for the per-request hot path, registered in a prom-client Registry and exported
 * in exactly prom-client's histogram shape (`_bucket{le=…}` cumulative, `+Inf`, `_sum`, `_count`).
 *
 * Why not prom-client's own: its observe() validates the label object, hashes it, and keys the bucket
 * counts by the bound's decimal string on every call, even through a cached `labels()` child; three
 * observes per request cost about 9% of the gateway's small-JSON throughput (A/B measured, see
 * native-bench/README.md). Here a series is looked up once per label set by the caller and observe() is
 * a bucket scan and three additions. Everything else (counters, gauges, process metrics, the text format)
 * stays prom-client's.
 */
import type { Registry } from 'prom-client';

export class HistogramSeries {
  /** per-bucket counts (not cumulative); the last slot is +Inf */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly bounds: Float64Array,
    readonly labels: Readonly<Record<string, string>>,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return; // prom-client throws; a metric must never fail a request
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

interface ExportValue {
  labels: Record<string, string | number>;
  sharedLabels: Readonly<Record<string, string>>;
  value: number;
  metricName: string;
}

/** The label sets of one fast metric, each with its series, found by the label values in `labelNames` order. */
abstract class SeriesFamily<S> {
  abstract readonly name: string;
  abstract readonly labelNames: readonly string[];
  protected readonly bySeries = new Map<string, S>();
  protected abstract makeSeries(labels: Record<string, string>): S;

  /** The series of one label set, values in `labelNames` order (keep it: this lookup is the slow part). */
  labels(...values: string[]): S {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name}: expected ${this.labelNames.length} label values`);
    const key = values.join('\0');
    let s = this.bySeries.get(key);
    if (!s) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i]));
      s = this.makeSeries(labels);
      this.bySeries.set(key, s);
    }
    return s;
  }

  /** Drops one label set's series (values in `labelNames` order); a series kept by a caller is orphaned. */
  remove(...values: string[]): void {
    this.bySeries.delete(values.join('\0'));
  }
}

export class FastHistogram<L extends string = string> extends SeriesFamily<HistogramSeries> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly bounds: Float64Array;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    buckets: readonly number[],
    registers: Registry[],
  ) {
    super();
    const sorted = [...new Set(buckets)].sort((a, b) => a - b);
    if (sorted.some((b) => !Number.isFinite(b))) throw new Error(`${name}: buckets must be finite numbers`);
    this.bounds = Float64Array.from(sorted);
    // The registry needs name, help, type and get()/getForPromString(), which it calls at scrape time.
    for (const r of registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  protected makeSeries(labels: Record<string, string>): HistogramSeries {
    return new HistogramSeries(this.bounds, labels);
  }

  reset(): void {
    for (const s of this.bySeries.values()) s.reset();
  }

  /** prom-client's JSON shape (getMetricsAsJSON): each value's labels are `le` (buckets) and the series' labels. */
  async get(): Promise<{ name: string; help: string; type: string; values: Array<{ labels: Record<string, string | number>; value: number; metricName: string; exemplar?: null }>; aggregator: string }> {
    const data = await this.getForPromString();
    const values = data.values.map(({ labels, sharedLabels, value, metricName }) =>
      metricName === `${this.name}_bucket` ? { value, metricName, exemplar: null, labels: { ...labels, ...sharedLabels } } : { value, metricName, labels: { ...sharedLabels } },
    );
    return { ...data, values };
  }

  /** What Registry.metrics() reads for the text format: series labels apart (`sharedLabels`), as prom-client. */
  async getForPromString(): Promise<{ name: string; help: string; type: string; values: ExportValue[]; aggregator: string }> {
    const values: ExportValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const s of this.bySeries.values()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i];
        values.push({ labels: { le: this.bounds[i] }, sharedLabels: s.labels, value: acc, metricName: bucketName });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucketName });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

/** One label set of a FastCounter: keep it and call inc(). */
export class CounterSeries {
  value = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}

  inc(by = 1): void {
    // prom-client throws on a negative or non-number increment; a metric must never fail a request
    if (by >= 0 && Number.isFinite(by)) this.value += by;
  }
}

/**
 * A Prometheus counter for the per-request hot path, in prom-client's counter shape (`name{labels} value`;
 * a labelled counter shows a series once it is first incremented), for the same reason as FastHistogram:
 * prom-client's inc() validates and hashes the label object on every call, even through a `labels()` child
 * (about 3% of the gateway's busy time on small JSON with four counters per request). Here the caller keeps
 * the series and inc() is one addition.
 */
export class FastCounter<L extends string = string> extends SeriesFamily<CounterSeries> {
  readonly type = 'counter';
  readonly aggregator = 'sum';

  constructor(
    /** (prom-client's registry renames a counter for OpenMetrics output, so not readonly) */
    public name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    registers: Registry[],
  ) {
    super();
    for (const r of registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  protected makeSeries(labels: Record<string, string>): CounterSeries {
    return new CounterSeries(labels);
  }

  /** Zeroes every series (prom-client's drops them; here callers keep their series, which must stay live). */
  reset(): void {
    for (const s of this.bySeries.values()) s.value = 0;
  }

  /** prom-client's shape for a counter (getMetricsAsJSON and the text format). */
  async get(): Promise<{ name: string; help: string; type: string; values: Array<{ value: number; labels: Record<string, string> }>; aggregator: string }> {
    const values: Array<{ value: number; labels: Record<string, string> }> = [];
    for (const s of this.bySeries.values()) values.push({ value: s.value, labels: s.labels });
    return { help: this.help, name: this.name, type: this.type, values, aggregator: this.aggregator };
  }
}
