/** Just enough Prometheus text parsing for the mocks' vLLM metrics: the sum of a metric over its series. Pure. */
export function promSums(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    let name: string;
    let rest: string;
    if (brace >= 0 && (space < 0 || brace < space)) {
      name = line.slice(0, brace);
      rest = line.slice(line.lastIndexOf('}') + 1);
    } else {
      name = line.slice(0, space);
      rest = line.slice(space);
    }
    const v = Number(rest.trim().split(/\s+/)[0]);
    if (!Number.isFinite(v)) continue;
    out.set(name, (out.get(name) ?? 0) + v);
  }
  return out;
}

export interface VllmSample {
  running: number;
  waiting: number;
  kv: number;
  prefixHits: number;
  prefixQueries: number;
}

export function vllmSample(text: string): VllmSample {
  const m = promSums(text);
  const g = (...names: string[]): number => { for (const n of names) { const v = m.get(n); if (v !== undefined) return v; } return 0; };
  return {
    running: g('vllm:num_requests_running'),
    waiting: g('vllm:num_requests_waiting'),
    kv: g('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'),
    prefixHits: g('vllm:prefix_cache_hits_total', 'vllm:prefix_cache_hits', 'vllm:gpu_prefix_cache_hits_total'),
    prefixQueries: g('vllm:prefix_cache_queries_total', 'vllm:prefix_cache_queries', 'vllm:gpu_prefix_cache_queries_total'),
  };
}
