/**
 * Hand-written Prometheus text exposition (format 0.0.4) in the shape vLLM's prometheus_client produces:
 * `# HELP` / `# TYPE` lines, counters named `..._total`, float values printed as Python does
 * (`0.0`, `12.0`, `1.7886264577368872e+09`), histogram `_bucket{le=...}`, `_count`, `_sum`.
 */

/** Python's repr() of a float. */
function pyRepr(v: number): string {
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return (Object.is(v, -0) ? '-0' : String(v)) + '.0';
  return String(v).replace(/e([+-])(\d)$/, 'e$10$2');
}

/** Python prometheus_client's floatToGoString: how vLLM's /metrics prints every value. */
export function fmt(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isNaN(v)) return 'NaN';
  const s = pyRepr(v);
  const dot = s.indexOf('.');
  if (v > 0 && dot > 6) {
    const mantissa = (s.slice(0, dot) + s.slice(dot + 1)).replace(/[0.]+$/, '');
    return `${mantissa[0]}.${mantissa.slice(1)}e+0${dot - 1}`;
  }
  return s;
}

export function labelStr(labels: Record<string, string>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(labels)) {
    parts.push(`${k}="${v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`);
  }
  return parts.length ? `{${parts.join(',')}}` : '';
}

export class Histogram {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly buckets: readonly number[]) {
    this.counts = new Float64Array(buckets.length);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    const b = this.buckets;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]) {
        this.counts[i]++;
        return;
      }
    }
  }
  render(name: string, help: string, labels: Record<string, string>): string {
    const ls = labelStr(labels);
    const inner = ls.slice(1, -1);
    let out = `# HELP ${name} ${help}\n# TYPE ${name} histogram\n`;
    let acc = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      acc += this.counts[i];
      out += `${name}_bucket{${inner ? inner + ',' : ''}le="${fmt(this.buckets[i])}"} ${fmt(acc)}\n`;
    }
    out += `${name}_bucket{${inner ? inner + ',' : ''}le="+Inf"} ${fmt(this.count)}\n`;
    out += `${name}_count${ls} ${fmt(this.count)}\n`;
    out += `${name}_sum${ls} ${fmt(this.sum)}\n`;
    return out;
  }
}

export function gauge(name: string, help: string, series: Array<[Record<string, string>, number]>): string {
  let out = `# HELP ${name} ${help}\n# TYPE ${name} gauge\n`;
  for (const [l, v] of series) out += `${name}${labelStr(l)} ${fmt(v)}\n`;
  return out;
}

export function counter(name: string, help: string, series: Array<[Record<string, string>, number]>): string {
  let out = `# HELP ${name} ${help}\n# TYPE ${name} counter\n`;
  for (const [l, v] of series) out += `${name}${labelStr(l)} ${fmt(v)}\n`;
  return out;
}

// vLLM's bucket boundaries (vllm/v1/metrics/loggers.py)
export const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
  160.0, 640.0, 2560.0,
];
export const ITL_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
export const REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
  1920.0, 7680.0,
];
