/**
 * Engine metric names → the router's engine-independent EndpointSignals. Pure.
 */
import type { EndpointSignals } from '../routing/types.js';
import { parsePrometheus, type Families } from './prom.js';

export type Engine = 'vllm' | 'sglang';

const VLLM = {
  waiting: 'vllm:num_requests_waiting',
  running: 'vllm:num_requests_running',
  kv: 'vllm:kv_cache_usage_perc',
  kvOld: 'vllm:gpu_cache_usage_perc',
  lora: 'vllm:lora_requests_info',
  cache: 'vllm:cache_config_info',
};

const SGLANG = {
  waiting: 'sglang:num_queue_reqs',
  running: 'sglang:num_running_reqs',
  kv: 'sglang:token_usage',
};

export const WANTED: Record<Engine, ReadonlySet<string>> = {
  vllm: new Set(Object.values(VLLM)),
  sglang: new Set(Object.values(SGLANG)),
};

function sum(f: Families, name: string): number | undefined {
  const s = f.get(name);
  if (!s || s.length === 0) return undefined;
  let t = 0;
  for (const x of s) if (Number.isFinite(x.value)) t += x.value;
  return t;
}

function max(f: Families, name: string): number | undefined {
  const s = f.get(name);
  if (!s || s.length === 0) return undefined;
  let m = -Infinity;
  for (const x of s) if (Number.isFinite(x.value) && x.value > m) m = x.value;
  return m === -Infinity ? undefined : m;
}

function list(s: string | undefined): string[] {
  if (!s) return [];
  return s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);
}

function clamp01(x: number | undefined): number {
  if (x === undefined || !Number.isFinite(x)) return 0;
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

/**
 * Signals from one /metrics text, or null when none of the engine's core metrics is present (a scrape
 * of the wrong thing is a failed scrape, not an idle server).
 */
export function signalsFromMetrics(engine: Engine, text: string): EndpointSignals | null {
  const f = parsePrometheus(text, WANTED[engine]);
  return engine === 'sglang' ? fromSglang(f) : fromVllm(f);
}

export function fromVllm(f: Families): EndpointSignals | null {
  const waiting = sum(f, VLLM.waiting);
  const running = sum(f, VLLM.running);
  const kv = max(f, VLLM.kv) ?? max(f, VLLM.kvOld);
  const s = baseSignals(waiting, running, kv);
  if (!s) return null;
  // vllm:lora_requests_info is one series per state change (value = its timestamp): the newest is current
  const lora = f.get(VLLM.lora);
  if (lora && lora.length > 0) {
    let best = lora[0];
    for (const x of lora) if (x.value > best.value) best = x;
    s.loraRunning = list(best.labels.running_lora_adapters);
    s.loraWaiting = list(best.labels.waiting_lora_adapters);
    const ml = Number(best.labels.max_lora);
    s.maxLoras = Number.isFinite(ml) ? ml : 0;
  }
  const cache = f.get(VLLM.cache)?.[0];
  if (cache) {
    const bs = Number(cache.labels.block_size);
    const nb = Number(cache.labels.num_gpu_blocks);
    if (Number.isFinite(bs) && bs > 0) s.blockSize = bs;
    if (Number.isFinite(nb) && nb > 0) s.numGpuBlocks = nb;
  }
  return s;
}

export function fromSglang(f: Families): EndpointSignals | null {
  const waiting = sum(f, SGLANG.waiting);
  const running = sum(f, SGLANG.running);
  const kv = max(f, SGLANG.kv);
  return baseSignals(waiting, running, kv);
}

/** The engine-independent part; null when the page has none of the three (it is not this engine's). */
function baseSignals(waiting: number | undefined, running: number | undefined, kv: number | undefined): EndpointSignals | null {
  if (waiting === undefined && running === undefined && kv === undefined) return null;
  return { waiting: waiting ?? 0, running: running ?? 0, kvUsage: clamp01(kv), loraRunning: [], loraWaiting: [], maxLoras: 0 };
}

/** LoRA adapters from an OpenAI /v1/models body (vLLM marks adapters with `parent`). */
export function adaptersFromModels(body: unknown): string[] | null {
  if (!body || typeof body !== 'object') return null;
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data)) return null;
  const out: string[] = [];
  for (const m of data) {
    if (m && typeof m === 'object') {
      const id = (m as { id?: unknown }).id;
      const parent = (m as { parent?: unknown }).parent;
      if (typeof id === 'string' && typeof parent === 'string' && parent.length > 0) out.push(id);
    }
  }
  return out;
}

/**
 * The base model's `max_model_len` from a /v1/models answer (vLLM's cards carry it; an adapter's card has
 * a `parent` and none), the least when several base models are listed; null when none says.
 */
export function maxModelLenFromModels(body: unknown): number | null {
  if (!body || typeof body !== 'object') return null;
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data)) return null;
  let least: number | null = null;
  for (const m of data) {
    if (!m || typeof m !== 'object') continue;
    const { parent, max_model_len: n } = m as { parent?: unknown; max_model_len?: unknown };
    if (typeof parent === 'string' && parent.length > 0) continue;
    if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0 && (least === null || n < least)) least = n;
  }
  return least;
}
