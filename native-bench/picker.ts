/**
 * `picker`: the router's pick time with 64 endpoints, a 200k-block prefix index and 16k-char
 * prompts (the time includes hashing the prompt), and the index's memory per block. Uses src/routing's
 * Router directly (pure, no sockets). The measurement runs in a child process started with
 * `--expose-gc`, so heap before/after filling the index can be compared after full collections.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { POLICY_NAMES, Router } from '../src/routing/index.js';
import type { EndpointSignals, PolicyName } from '../src/routing/index.js';
import { numOpt, percentileSorted, round, writeResult } from './common.js';

const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cli.js');
const POOL = 'bench';
const MODEL = 'bench-model';

/** splitmix-ish 32-bit hash of two ints. */
function h2(a: number, b: number): number {
  let x = (Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x632be5ab, 0xc2b2ae35)) >>> 0;
  x ^= x >>> 16; x = Math.imul(x, 0x7feb352d); x ^= x >>> 15; x = Math.imul(x, 0x846ca68b); x ^= x >>> 16;
  return x >>> 0;
}

/** Prompts made of 64-char pieces from a fixed table: fast to build, distinct per seed, shareable by prefix. */
export class Prompts {
  private readonly pieces: string[] = [];
  constructor(private readonly chars: number) {
    const letters = 'etaoinshrdlcumwfgypbvkjxqz     ';
    for (let i = 0; i < 4096; i++) {
      const cs: string[] = [];
      for (let j = 0; j < 64; j++) cs.push(letters[h2(i, j) % letters.length]);
      this.pieces.push(cs.join('')); // flat strings: a `+=`-built piece is a deep rope, slow to join
    }
  }
  /** The prompt of `seed`; with `sharedFrom`, its first `sharedPieces` pieces are those of prompt `sharedFrom`. */
  make(seed: number, sharedFrom = -1, sharedPieces = 0): string {
    const n = Math.ceil(this.chars / 64);
    const parts = new Array<string>(n);
    for (let j = 0; j < n; j++) parts[j] = this.pieces[h2(j < sharedPieces ? sharedFrom : seed, j) & 4095];
    return parts.join('').slice(0, this.chars);
  }
}

function signals(i: number, now: number): EndpointSignals {
  return { waiting: i % 3, running: 4 + (i % 7), kvUsage: ((i * 37) % 80) / 100, loraRunning: [], loraWaiting: [], maxLoras: 0 };
  void now;
}

export interface PickerResult {
  endpoints: number;
  indexed_blocks: number;
  index_nodes: number;
  prompt_chars: number;
  picks: number;
  /** the decision (hash, match, score, accounting): what a request waits for before it is sent */
  pick_us: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** learning the pick into the index, which the gateway does once undici has written the request */
  learn_us: { p50: number; p99: number; max: number };
  /** both, per pick */
  pick_and_learn_us: { p50: number; p99: number };
  index_capacity_blocks: number;
  indexed_blocks_at_end: number;
  /** the same picks with dryRun (decide only: no accounting, no learning into the index) */
  pick_dry_run_us: { p50: number; p99: number };
  /** the same dry runs explained (every candidate's scores), as the gateway's decisions ring asks */
  pick_dry_run_explained_us: { p50: number; p99: number };
  pick_us_by_prompt: { repeated: { p50: number; p99: number }; half_shared: { p50: number; p99: number }; new: { p50: number; p99: number } };
  index_bytes_per_block: number;
  index_bytes_per_block_estimate: number | null;
  heap_bytes: { before: number; after: number };
  policy: string;
  gc_exposed: boolean;
}

// One options shape for every call, as in the gateway: a call site that meets a new object shape deoptimises
// pick(), which then runs unoptimised for a few hundred calls (that was most of the p99 when the fill, the
// warm-up and the timed part each passed a different one).
const LIVE = { deferLearn: true, dryRun: false, explain: false };
const DRY = { deferLearn: true, dryRun: true, explain: false };
/** a dry run explained, as every pick is while the gateway keeps a ring of decisions (admin.decisions > 0) */
const DRY_EXPLAIN = { deferLearn: true, dryRun: true, explain: true };

export function measurePicker(o: { endpoints: number; blocks: number; promptChars: number; picks: number; policy: PolicyName }): PickerResult {
  const gc = (globalThis as { gc?: () => void }).gc;
  const fullGc = (): void => { if (gc) for (let i = 0; i < 3; i++) gc(); };
  const eps = Array.from({ length: o.endpoints }, (_, i) => `10.0.${i >> 8}.${i & 255}:8000`);
  const prompts = new Prompts(o.promptChars);
  let now = 1_000_000;
  // The index keeps its entries in typed arrays: count their backing stores with the JS heap, and measure
  // from before the router exists so that preallocated tables count too.
  const mem = (): number => {
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  fullGc();
  const before = mem();
  // The index is bounded as in production (capacity per endpoint, LRU): 1.25 × blocks / endpoints, so it holds
  // `blocks` after the fill and stays at its bound, evicting, while the timed picks learn.
  const capacity = Math.ceil((1.25 * o.blocks) / o.endpoints);
  const prefix = { max_blocks: Math.max(256, Math.ceil(o.promptChars / 64)), capacity_blocks_per_endpoint: capacity };
  const router = Router.fromPool(POOL, { policy: o.policy, prefix }, eps, { random: () => 0.5 });
  eps.forEach((e, i) => router.updateSignals(e, signals(i, now), now));
  const tokens = Math.ceil(o.promptChars / 4);
  // Warm the code paths (and JIT) on a throwaway router so the filled one holds only the index: the same
  // mix as the timed part (repeat, half shared, new; learning deferred and then done; dry runs), with a
  // small capacity so that eviction runs too. Without it the first ~2000 timed picks run partly unoptimised
  // code and make most of the p99.
  {
    const w = Router.fromPool(POOL, { policy: o.policy, prefix: { ...prefix, capacity_blocks_per_endpoint: 1024 } }, eps, { random: () => 0.5 });
    eps.forEach((e, i) => w.updateSignals(e, signals(i, now), now));
    for (let k = 0; k < 6000; k++) {
      const t = now + k;
      const base = 1e6 + (h2(k, 3) % Math.max(1, k >> 1));
      const text = k < 1000 || k % 3 === 2 ? prompts.make(1e6 + k) : k % 3 === 0 ? prompts.make(base) : prompts.make(2e6 + k, base, Math.floor(o.promptChars / 128));
      const r = w.pick(POOL, { model: MODEL, promptText: text, promptTokens: tokens }, t, k % 5 === 4 ? (k % 10 === 9 ? DRY_EXPLAIN : DRY) : LIVE);
      if (r.kind === 'ok' && k % 5 !== 4) { w.learn(r.ticket); w.onFirstByte(r.ticket, t); w.onEnd(r.ticket, t, 'ok'); }
      if (k % 64 === 63) eps.forEach((e, i) => w.updateSignals(e, signals(i + k, t), t));
    }
  }
  // Fill: distinct prompts until the index holds `blocks` entries.
  let filled = 0;
  for (let k = 0; filled < o.blocks && k < 10 * o.blocks; k++) {
    now += 1;
    const r = router.pick(POOL, { model: MODEL, promptText: prompts.make(k), promptTokens: tokens }, now, LIVE);
    if (r.kind === 'ok') { router.learn(r.ticket); router.onFirstByte(r.ticket, now); router.onEnd(r.ticket, now, 'ok'); }
    filled = router.indexStats(POOL).blocks;
    if (k % 64 === 63) eps.forEach((e, i) => router.updateSignals(e, signals(i + k, now), now));
  }
  const fillPrompts = Math.max(1, Math.round(filled / Math.ceil(o.promptChars / 64)));
  fullGc();
  const after = mem();
  const stats = router.pool(POOL)?.index.stats() ?? { ...router.indexStats(POOL), nodes: 0 };
  // Settle after the forced full collections (their concurrent sweeping competes for the two cores): dry runs,
  // which change nothing.
  for (let k = 0; k < 1000; k++) router.pick(POOL, { model: MODEL, promptText: prompts.make(3e6 + k, h2(k, 5) % fillPrompts, 128), promptTokens: tokens }, now, DRY);
  // Timed picks: a third repeat a filled prompt, a third share half of one, a third are new. As in the
  // gateway, the decision is made with deferLearn and learning into the index follows (after the upstream write there):
  // the two are timed apart, and together.
  const samples = new Float64Array(o.picks);
  const learnSamples = new Float64Array(o.picks);
  const half = Math.floor(o.promptChars / 128);
  for (let k = 0; k < o.picks; k++) {
    now += 1;
    const kind = k % 3;
    const base = h2(k, 7) % fillPrompts;
    const text = kind === 0 ? prompts.make(base) : kind === 1 ? prompts.make(5e6 + k, base, half) : prompts.make(9e6 + k);
    const t = process.hrtime.bigint();
    const r = router.pick(POOL, { model: MODEL, promptText: text, promptTokens: tokens }, now, LIVE);
    const t1 = process.hrtime.bigint();
    if (r.kind === 'ok') router.learn(r.ticket);
    learnSamples[k] = Number(process.hrtime.bigint() - t1) / 1000;
    samples[k] = Number(t1 - t) / 1000;
    if (r.kind === 'ok') { router.onFirstByte(r.ticket, now); router.onEnd(r.ticket, now, 'ok'); }
    if (k % 64 === 63) eps.forEach((e, i) => router.updateSignals(e, signals(i + k, now), now));
  }
  // The decision alone (dryRun: match + score, no learning into the index), same prompt mix.
  const dry = new Float64Array(Math.min(o.picks, 5000));
  for (let k = 0; k < dry.length; k++) {
    const kind = k % 3;
    const base = h2(k, 11) % fillPrompts;
    const text = kind === 0 ? prompts.make(base) : kind === 1 ? prompts.make(7e6 + k, base, half) : prompts.make(8e6 + k);
    const t = process.hrtime.bigint();
    router.pick(POOL, { model: MODEL, promptText: text, promptTokens: tokens }, now, DRY);
    dry[k] = Number(process.hrtime.bigint() - t) / 1000;
  }
  dry.sort();
  // The same, explained: what admin.decisions adds to each pick.
  const explained = new Float64Array(dry.length);
  for (let k = 0; k < explained.length; k++) {
    const kind = k % 3;
    const base = h2(k, 11) % fillPrompts;
    const text = kind === 0 ? prompts.make(base) : kind === 1 ? prompts.make(7e6 + k, base, half) : prompts.make(8e6 + k);
    const t = process.hrtime.bigint();
    router.pick(POOL, { model: MODEL, promptText: text, promptTokens: tokens }, now, DRY_EXPLAIN);
    explained[k] = Number(process.hrtime.bigint() - t) / 1000;
  }
  explained.sort();
  const byKind = (kind: number): { p50: number; p99: number } => {
    const k = Float64Array.from(samples.filter((_, i) => i % 3 === kind)).sort();
    return { p50: round(percentileSorted(k, 0.5), 2), p99: round(percentileSorted(k, 0.99), 2) };
  };
  const s = Float64Array.from(samples).sort();
  const ls = Float64Array.from(learnSamples).sort();
  const both = Float64Array.from(samples, (v, i) => v + learnSamples[i]).sort();
  const endStats = router.pool(POOL)?.index.stats() ?? { blocks: 0 };
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return {
    endpoints: o.endpoints,
    indexed_blocks: filled,
    index_nodes: stats.nodes ?? 0,
    prompt_chars: o.promptChars,
    picks: o.picks,
    pick_us: { p50: round(percentileSorted(s, 0.5), 2), p90: round(percentileSorted(s, 0.9), 2), p99: round(percentileSorted(s, 0.99), 2), max: round(s[s.length - 1] ?? 0, 2), mean: round(mean, 2) },
    pick_us_by_prompt: { repeated: byKind(0), half_shared: byKind(1), new: byKind(2) },
    learn_us: { p50: round(percentileSorted(ls, 0.5), 2), p99: round(percentileSorted(ls, 0.99), 2), max: round(ls[ls.length - 1] ?? 0, 2) },
    pick_and_learn_us: { p50: round(percentileSorted(both, 0.5), 2), p99: round(percentileSorted(both, 0.99), 2) },
    index_capacity_blocks: capacity * o.endpoints,
    indexed_blocks_at_end: endStats.blocks,
    pick_dry_run_us: { p50: round(percentileSorted(dry, 0.5), 2), p99: round(percentileSorted(dry, 0.99), 2) },
    pick_dry_run_explained_us: { p50: round(percentileSorted(explained, 0.5), 2), p99: round(percentileSorted(explained, 0.99), 2) },
    index_bytes_per_block: round((after - before) / Math.max(1, filled), 1),
    index_bytes_per_block_estimate: stats.approxBytes ? round(stats.approxBytes / Math.max(1, stats.blocks), 1) : null,
    heap_bytes: { before, after },
    policy: o.policy,
    gc_exposed: !!gc,
  };
}

function settingsFrom(opts: Map<string, string>) {
  return {
    endpoints: numOpt(opts, 'endpoints', 64),
    blocks: numOpt(opts, 'blocks', 200_000),
    promptChars: numOpt(opts, 'prompt-chars', 16384),
    picks: numOpt(opts, 'picks', 20_000),
    policy: policyName(opts.get('policy') ?? 'scored'),
  };
}

function policyName(s: string): PolicyName {
  if (!(POLICY_NAMES as readonly string[]).includes(s)) throw new Error(`--policy: one of ${POLICY_NAMES.join(', ')}, not "${s}"`);
  return s as PolicyName;
}

/** Internal: runs in the `--expose-gc` child and prints the result as JSON on stdout. */
export async function pickerChild(opts: Map<string, string>): Promise<void> {
  process.stdout.write(JSON.stringify(measurePicker(settingsFrom(opts))) + '\n');
}

export async function runPicker(opts: Map<string, string>): Promise<void> {
  const out = opts.get('out') ?? 'bench-out';
  const s = settingsFrom(opts);
  const args = ['--expose-gc', CLI, 'picker-child', '--endpoints', String(s.endpoints), '--blocks', String(s.blocks), '--prompt-chars', String(s.promptChars), '--picks', String(s.picks), '--policy', s.policy];
  const text = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    child.stdout.on('data', (b) => { buf += b; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.on('error', reject);
    child.on('exit', (code) => { clearTimeout(killer); code === 0 ? resolve(buf) : reject(new Error(`picker child exited ${code}`)); });
  });
  const r = JSON.parse(text.trim().split('\n').pop()!) as PickerResult;
  const target = { pick_us_p99_max: 20, met: r.pick_us.p99 <= 20 };
  const file = writeResult(out, 'picker.json', 'picker', { ...s, node_flags: ['--expose-gc'], pick_mix: '1/3 repeat an indexed prompt, 1/3 share half of one, 1/3 new; each pick learns into the index right after it (deferLearn, as the gateway does after the upstream write), timed apart' }, { ...r, target });
  console.log(`picker: ${r.endpoints} endpoints, ${r.indexed_blocks} indexed blocks (${r.index_nodes} nodes), ${r.prompt_chars}-char prompts, policy ${r.policy}`);
  console.log(`  pick µs: p50 ${r.pick_us.p50}  p90 ${r.pick_us.p90}  p99 ${r.pick_us.p99}  max ${r.pick_us.max}  (target p99 ≤ 20: ${target.met ? 'met' : 'NOT met'})`);
  console.log(`  learn µs (after the upstream write, in the gateway): p50 ${r.learn_us.p50}  p99 ${r.learn_us.p99}  max ${r.learn_us.max};  pick + learn: p50 ${r.pick_and_learn_us.p50}  p99 ${r.pick_and_learn_us.p99}`);
  console.log(`  index: ${r.indexed_blocks} blocks after the fill, ${r.indexed_blocks_at_end} at the end, bound ${r.index_capacity_blocks}`);
  console.log(`  dry-run pick µs (decide only, no index learning): p50 ${r.pick_dry_run_us.p50}  p99 ${r.pick_dry_run_us.p99}`);
  console.log(`  the same, explained (admin.decisions > 0): p50 ${r.pick_dry_run_explained_us.p50}  p99 ${r.pick_dry_run_explained_us.p99}`);
  console.log(`  index bytes per block: ${r.index_bytes_per_block} measured (heap + array buffers after − before, full GC)${r.index_bytes_per_block_estimate !== null ? `, ${r.index_bytes_per_block_estimate} by the index's own estimate` : ''}`);
  console.log(`\nwrote ${file}`);
}
