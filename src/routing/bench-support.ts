/**
 * The picker benchmark's workload, reusable by native-bench and tests: a pool of N endpoints with fresh
 * signals, an index pre-filled to about `indexBlocks` blocks, and picks of `promptChars`-character prompts
 * that share long prefixes with what the index holds (the expensive case: deep matches). Pure apart from
 * the clock the caller passes (e.g. performance.now); no I/O.
 */
import { mulberry32 } from '../common/random.js';
import { CHARS_PER_TOKEN } from '../openai/tokens.js';
import { Router } from './router.js';
import type { EndpointSignals, PickInput, Ticket } from './types.js';

export interface PickBenchOptions {
  endpoints?: number;
  indexBlocks?: number;
  promptChars?: number;
  picks?: number;
  /** ms, sub-ms precision (performance.now) */
  clock: () => number;
  seed?: number;
}

export interface PickBenchResult {
  picks: number;
  us: { p50: number; p90: number; p99: number; max: number; mean: number };
  index: { blocks: number; approxBytes: number };
  endpoints: number;
  promptChars: number;
}

function text(r: () => number, n: number): string {
  const words = ['the', 'model', 'cache', 'prefix', 'router', 'token', 'endpoint', 'latency', 'queue', 'block'];
  const parts: string[] = [];
  let len = 0;
  while (len < n) {
    const w = words[Math.floor(r() * words.length)] + (r() < 0.2 ? String(Math.floor(r() * 1000)) : '');
    parts.push(w);
    len += w.length + 1;
  }
  return parts.join(' ').slice(0, n);
}

export function benchPick(opts: PickBenchOptions): PickBenchResult {
  const nEp = opts.endpoints ?? 64;
  const indexBlocks = opts.indexBlocks ?? 200_000;
  const promptChars = opts.promptChars ?? 16384;
  const picks = opts.picks ?? 20_000;
  const r = mulberry32(opts.seed ?? 1);
  const eps = Array.from({ length: nEp }, (_, i) => `10.0.${i >> 8}.${i & 255}:8000`);
  const router = Router.fromPool(
    'bench',
    { prefix: { capacity_blocks_per_endpoint: Math.ceil((indexBlocks * 1.5) / nEp) }, saturation: { queue_depth: 0, kv_cache: 0 } },
    eps,
    { random: r },
  );
  const sig = (): EndpointSignals => ({
    waiting: Math.floor(r() * 4),
    running: Math.floor(r() * 32),
    kvUsage: r() * 0.7,
    loraRunning: [],
    loraWaiting: [],
    maxLoras: 0,
  });
  // shared "system prompts" (half of a prompt), each cached on a few endpoints
  const systems = Array.from({ length: 64 }, () => text(r, promptChars / 2));
  const fill: PickInput[] = [];
  const blocksPerPrompt = Math.floor(promptChars / 64);
  const fillCount = Math.ceil(indexBlocks / (blocksPerPrompt * 0.75));
  for (let i = 0; i < fillCount; i++) {
    const s = systems[i % systems.length];
    fill.push({ model: 'm', promptText: s + text(r, promptChars - s.length), promptTokens: promptChars / CHARS_PER_TOKEN });
  }
  let now = 0;
  for (const e of eps) router.updateSignals(e, sig(), now);
  for (const f of fill) {
    const res = router.pick('bench', f, now, { policy: 'round_robin' });
    if (res.kind === 'ok') router.onEnd(res.ticket, now, 'ok');
    if (router.indexStats().blocks >= indexBlocks) break;
  }
  const inputs: PickInput[] = [];
  for (let i = 0; i < 512; i++) {
    const s = systems[Math.floor(r() * systems.length)];
    inputs.push({ model: 'm', promptText: s + text(r, promptChars - s.length), promptTokens: promptChars / CHARS_PER_TOKEN });
  }
  const times = new Float64Array(picks);
  const open: Array<{ t: Ticket; end: number }> = [];
  for (let i = 0; i < picks; i++) {
    now += 1;
    if (i % 64 === 0) for (const e of eps) router.updateSignals(e, sig(), now);
    const input = inputs[i % inputs.length];
    const t0 = opts.clock();
    const res = router.pick('bench', input, now);
    times[i] = (opts.clock() - t0) * 1000;
    if (res.kind === 'ok') open.push({ t: res.ticket, end: now + 200 });
    while (open.length > 0 && open[0].end <= now) router.onEnd(open.shift()!.t, now, 'ok');
  }
  const sorted = Array.from(times).sort((a, b) => a - b);
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  let sum = 0;
  for (const x of sorted) sum += x;
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    picks,
    us: { p50: round(q(0.5)), p90: round(q(0.9)), p99: round(q(0.99)), max: round(sorted[sorted.length - 1]), mean: round(sum / picks) },
    index: router.indexStats(),
    endpoints: nEp,
    promptChars,
  };
}
