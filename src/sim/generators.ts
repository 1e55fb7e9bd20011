/**
 * Seeded workload generators. Each returns requests in the trace loader's shape (SimRequest, 512-token
 * hash_id blocks), sorted by arrival, so benchmarks can replay them live too (traceRequestText).
 *
 * The sizes are chosen against 8 endpoints of the default engine profile (16k prefill tokens/s and
 * ~400k KV tokens each): the shared working set of shared-prefix, multi-turn and rag is larger than one
 * endpoint's KV cache but fits in the pool's, so where a request goes decides how much it recomputes.
 * Use `rate` (or the simulator's --rate-scale) to move the load.
 */
import { Rng, hash2 } from './rng.js';
import { TRACE_BLOCK_TOKENS } from './trace.js';
import type { SimRequest } from './types.js';

export const GENERATORS = ['shared-prefix', 'multi-turn', 'rag', 'no-sharing', 'lora-mix', 'burst', 'spikes'] as const;
export type GeneratorName = (typeof GENERATORS)[number];

export interface GenerateOptions {
  seed?: number;
  /** Number of requests (default per generator: DEFAULT_REQUESTS). */
  requests?: number;
  /** Mean arrival rate in requests/s (multi-turn: turns/s over all sessions); default per generator. */
  rate?: number;
  /** lora-mix: the adapters (default lora-a..lora-d). */
  loras?: string[];
}

/** Default mean arrival rates (requests/s). */
export const DEFAULT_RATES: Record<GeneratorName, number> = {
  'shared-prefix': 8,
  'multi-turn': 8,
  rag: 5,
  'no-sharing': 8,
  'lora-mix': 6,
  burst: 2,
  spikes: 2,
};

/**
 * Default request counts: enough that the first (cold) prefill of each shared prompt is under 1% of the
 * requests, so a TTFT p99 measures routing rather than cold starts.
 */
export const DEFAULT_REQUESTS: Record<GeneratorName, number> = {
  'shared-prefix': 4000,
  'multi-turn': 1000,
  rag: 3000,
  'no-sharing': 1000,
  'lora-mix': 1000,
  burst: 1000,
  spikes: 1000,
};

export const DEFAULT_LORAS = ['lora-a', 'lora-b', 'lora-c', 'lora-d'];

/** Block-id allocator: ids are unique per workload; the top bit keeps them apart from trace ids. */
class Ids {
  private n = 0;
  constructor(private readonly base: number) {}
  next(): number {
    return (hash2(this.base, this.n++) & 0x7fffffff) >>> 0;
  }
  /** Fresh ids for `tokens` tokens. */
  blocks(tokens: number): number[] {
    const out: number[] = [];
    for (let i = 0; i < Math.ceil(tokens / TRACE_BLOCK_TOKENS); i++) out.push(this.next());
    return out;
  }
}

const clamp = (x: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, Math.round(x)));
const blocksOf = (tokens: number) => Math.ceil(tokens / TRACE_BLOCK_TOKENS);

export function generateWorkload(name: string, opts: GenerateOptions = {}): SimRequest[] {
  const seed = opts.seed ?? 1;
  const n = opts.requests ?? DEFAULT_REQUESTS[name as GeneratorName] ?? 1000;
  if (!(GENERATORS as readonly string[]).includes(name)) {
    throw new Error(`unknown generator "${name}" (one of: ${GENERATORS.join(', ')})`);
  }
  const g = name as GeneratorName;
  const rate = opts.rate ?? DEFAULT_RATES[g];
  const rng = new Rng(hash2(seed, GENERATORS.indexOf(g) + 101));
  const ids = new Ids(hash2(seed, 0xb10c));
  let out: SimRequest[];
  switch (g) {
    case 'shared-prefix':
      out = sharedPrefix(rng, ids, n, rate);
      break;
    case 'multi-turn':
      out = multiTurn(rng, ids, n, rate);
      break;
    case 'rag':
      out = rag(rng, ids, n, rate);
      break;
    case 'no-sharing':
      out = noSharing(rng, ids, n, rate);
      break;
    case 'lora-mix':
      out = loraMix(rng, ids, n, rate, opts.loras ?? DEFAULT_LORAS);
      break;
    case 'burst':
      out = burst(rng, ids, n, rate);
      break;
    case 'spikes':
      out = spikes(rng, ids, n, rate);
      break;
  }
  return out
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.arrivalMs - b.r.arrivalMs || a.i - b.i)
    .slice(0, n)
    .map((x) => x.r);
}

/** Poisson arrivals. */
function arrivals(rng: Rng, n: number, rate: number, start = 0): number[] {
  const out: number[] = [];
  let t = start;
  for (let i = 0; i < n; i++) {
    out.push(Math.round(t));
    t += rng.exp(1000 / rate);
  }
  return out;
}

function withSuffix(ids: Ids, prefixIds: number[], prefixTokens: number, suffixTokens: number): { hashIds: number[]; inputTokens: number } {
  // prefixTokens is a whole number of blocks, so the suffix starts a fresh block.
  return { hashIds: [...prefixIds, ...ids.blocks(suffixTokens)], inputTokens: prefixTokens + suffixTokens };
}

/**
 * Long system prompts (SHARED_PROMPTS of 8k–24k tokens, Zipf popularity) + a short unique question. Their
 * total (≈ 1M tokens) is ≈ 2.5× one endpoint's KV cache and a third of 8 endpoints': spread evenly, every
 * endpoint thrashes; partitioned by prefix, each keeps its share.
 */
export const SHARED_PROMPTS = 32;
function sharedPrefix(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  const prompts: { ids: number[]; tokens: number }[] = [];
  for (let i = 0; i < SHARED_PROMPTS; i++) {
    const tokens = rng.int(16, 48) * TRACE_BLOCK_TOKENS;
    prompts.push({ ids: ids.blocks(tokens), tokens });
  }
  return arrivals(rng, n, rate).map((arrivalMs) => {
    const p = prompts[rng.zipf(prompts.length, 0.8)];
    const suffix = clamp(rng.logNormal(200, 0.8), 20, 2000);
    return { arrivalMs, ...withSuffix(ids, p.ids, p.tokens, suffix), outputTokens: clamp(rng.logNormal(120, 0.8), 4, 1000) };
  });
}

/** Chat sessions: a shared system prompt, then each turn appends the last answer and a new question. */
function multiTurn(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  const systems: { ids: number[]; tokens: number }[] = [];
  for (let i = 0; i < 4; i++) {
    const tokens = rng.int(4, 12) * TRACE_BLOCK_TOKENS;
    systems.push({ ids: ids.blocks(tokens), tokens });
  }
  const meanTurns = 8;
  const sessionRate = rate / meanTurns;
  const out: SimRequest[] = [];
  let start = 0;
  while (out.length < n) {
    start += rng.exp(1000 / sessionRate);
    const sys = systems[rng.zipf(systems.length, 1)];
    const turns = rng.int(4, 12);
    const own: number[] = []; // the session's own blocks, allocated as its context grows
    let ctx = 0; // session tokens after the system prompt
    let t = start;
    for (let k = 0; k < turns && out.length < n; k++) {
      ctx += clamp(rng.logNormal(400, 0.7), 10, 4000); // the user's message
      while (own.length < blocksOf(ctx)) own.push(ids.next());
      const outputTokens = clamp(rng.logNormal(250, 0.7), 8, 1500);
      out.push({ arrivalMs: Math.round(t), inputTokens: sys.tokens + ctx, outputTokens, hashIds: [...sys.ids, ...own.slice(0, blocksOf(ctx))] });
      ctx += outputTokens; // the answer joins the context
      t += outputTokens * 15 + rng.exp(8000); // reading the answer, then thinking
    }
  }
  return out;
}

/**
 * Retrieval over collections: a shared instruction block, then the collection's standing context (2–3
 * documents, fixed per collection; 120 collections with Zipf popularity, ≈ 1M tokens in all: more than one
 * endpoint's KV cache, a third of 8 endpoints'), then 1–2 retrieved documents (Zipf over a 300-document
 * corpus of 1k–6k tokens, in corpus order), then a question. Routing by prefix keeps each collection's
 * context warm on a few endpoints; spreading evenly recomputes it nearly every time.
 */
function rag(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  const sysTokens = 2 * TRACE_BLOCK_TOKENS;
  const sys = ids.blocks(sysTokens);
  const docs: number[][] = [];
  for (let i = 0; i < 300; i++) docs.push(ids.blocks(rng.int(2, 12) * TRACE_BLOCK_TOKENS));
  const collections: number[][] = [];
  for (let c = 0; c < 120; c++) {
    const ctx: number[] = [];
    for (let k = rng.int(2, 3); k > 0; k--) ctx.push(...ids.blocks(rng.int(4, 10) * TRACE_BLOCK_TOKENS));
    collections.push(ctx);
  }
  return arrivals(rng, n, rate).map((arrivalMs) => {
    const hashIds = [...sys, ...collections[rng.zipf(collections.length, 1)]];
    const k = rng.int(1, 2);
    const chosen: number[] = [];
    while (chosen.length < k) {
      const d = rng.zipf(docs.length, 1.1);
      if (!chosen.includes(d)) chosen.push(d);
    }
    chosen.sort((a, b) => a - b);
    for (const d of chosen) hashIds.push(...docs[d]);
    const prefixTokens = hashIds.length * TRACE_BLOCK_TOKENS;
    const q = clamp(rng.logNormal(80, 0.6), 10, 600);
    return { arrivalMs, ...withSuffix(ids, hashIds, prefixTokens, q), outputTokens: clamp(rng.logNormal(150, 0.7), 4, 1000) };
  });
}

/** Unique prompts: nothing to share, load balance is all that matters. */
function noSharing(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  return arrivals(rng, n, rate).map((arrivalMs) => {
    const inputTokens = clamp(rng.logNormal(3000, 0.9), 16, 32000);
    return { arrivalMs, inputTokens, hashIds: ids.blocks(inputTokens), outputTokens: clamp(rng.logNormal(150, 0.8), 4, 1500) };
  });
}

/** Several adapters (Zipf popularity), each with its own system prompt. */
function loraMix(rng: Rng, ids: Ids, n: number, rate: number, loras: string[]): SimRequest[] {
  const prompts = loras.map(() => {
    const tokens = rng.int(4, 8) * TRACE_BLOCK_TOKENS;
    return { ids: ids.blocks(tokens), tokens };
  });
  return arrivals(rng, n, rate).map((arrivalMs) => {
    const i = rng.zipf(loras.length, 0.7);
    const suffix = clamp(rng.logNormal(300, 0.8), 16, 4000);
    return {
      arrivalMs,
      ...withSuffix(ids, prompts[i].ids, prompts[i].tokens, suffix),
      outputTokens: clamp(rng.logNormal(150, 0.8), 4, 1000),
      lora: loras[i],
      model: loras[i],
    };
  });
}

/** Quiet unique traffic at `rate`, then a spike (40% of the requests within 4 s) sharing one long prefix. */
function burst(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  const nSpike = Math.round(n * 0.4);
  const nQuiet = n - nSpike;
  const quiet = arrivals(rng, nQuiet, rate);
  const spikeAt = quiet[Math.floor(nQuiet / 2)] ?? 0;
  const prefixTokens = 32 * TRACE_BLOCK_TOKENS;
  const prefix = ids.blocks(prefixTokens);
  const out: SimRequest[] = quiet.map((arrivalMs) => {
    const inputTokens = clamp(rng.logNormal(2000, 0.8), 16, 16000);
    return { arrivalMs, inputTokens, hashIds: ids.blocks(inputTokens), outputTokens: clamp(rng.logNormal(120, 0.8), 4, 1000) };
  });
  for (const arrivalMs of arrivals(rng, nSpike, nSpike / 4, spikeAt)) {
    const suffix = clamp(rng.logNormal(200, 0.6), 16, 2000);
    out.push({ arrivalMs, ...withSuffix(ids, prefix, prefixTokens, suffix), outputTokens: clamp(rng.logNormal(100, 0.7), 4, 800) });
  }
  return out;
}

/** Requests per spike of `spikes`: 20 per endpoint of the default pool of 8. */
export const SPIKE_SIZE = 160;

/**
 * Sudden simultaneous bursts into idle capacity: a quarter of the requests are quiet unique traffic at
 * `rate`; the rest come in spikes of SPIKE_SIZE short unique requests within 40 ms, evenly spaced over the
 * quiet traffic's span. A spike is 20 requests per endpoint of the default pool, far below an engine's
 * 256 seats and about one 8192-token step of prefill each: an engine would schedule them all at once, so a
 * router that rejects part of a spike rejects on its own count of requests in flight, not on any queue.
 */
function spikes(rng: Rng, ids: Ids, n: number, rate: number): SimRequest[] {
  const nQuiet = Math.round(n / 4);
  const quiet = arrivals(rng, nQuiet, rate);
  const span = quiet.length > 0 ? quiet[quiet.length - 1] : 0;
  const nSpikes = Math.max(1, Math.ceil((n - nQuiet) / SPIKE_SIZE));
  const one = () => {
    const inputTokens = clamp(rng.logNormal(300, 0.5), 16, 2000);
    return { inputTokens, hashIds: ids.blocks(inputTokens), outputTokens: clamp(rng.logNormal(100, 0.6), 4, 600) };
  };
  const out: SimRequest[] = quiet.map((arrivalMs) => ({ arrivalMs, ...one() }));
  for (let k = 0, left = n - nQuiet; k < nSpikes; k++) {
    const at = Math.round((span * (k + 1)) / (nSpikes + 1));
    for (let j = 0; j < SPIKE_SIZE && left > 0; j++, left--) out.push({ arrivalMs: at + rng.int(0, 40), ...one() });
  }
  return out;
}
