/**
 * Mooncake traces (see native-bench/traces/README.md) and the two views of a block chain:
 * - for the simulated engine, token ids derived from (block id, position in block);
 * - for the router, 64-char prefix-block hashes derived from (block id, char offset), chained, so that
 *   requests sharing leading hash_ids share leading router blocks too (and only leading ones);
 * - for live benchmarks, a text per block id (traceRequestText), same id → same text.
 * In all three, a partial block is a prefix of the full block with the same id, so a multi-turn prompt
 * that grows into its last block keeps sharing what it shared before.
 */
import { readFileSync } from 'node:fs';
import { CHARS_PER_TOKEN } from '../openai/tokens.js';
import { Rng, hash2, hashStr, mix32 } from './rng.js';
import type { SimRequest } from './types.js';

/** Tokens per trace block (Mooncake's hash_ids). */
export const TRACE_BLOCK_TOKENS = 512;
/** Characters of one block's text (the one token estimate: openai/tokens.ts). */
export const TRACE_BLOCK_CHARS = TRACE_BLOCK_TOKENS * CHARS_PER_TOKEN;

/** Parse Mooncake JSONL text. Throws with the line number on a malformed line. */
export function parseTrace(text: string, limit = Infinity): SimRequest[] {
  const out: SimRequest[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length && out.length < limit; i++) {
    const line = lines[i].trim();
    if (line === '') continue;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch (e) {
      throw new Error(`trace line ${i + 1}: not JSON (${(e as Error).message})`);
    }
    const ts = o.timestamp, inp = o.input_length, outp = o.output_length, ids = o.hash_ids;
    if (typeof ts !== 'number' || typeof inp !== 'number' || typeof outp !== 'number' || !Array.isArray(ids)) {
      throw new Error(`trace line ${i + 1}: needs numeric timestamp, input_length, output_length and an array hash_ids`);
    }
    const req: SimRequest = {
      arrivalMs: ts,
      inputTokens: Math.max(1, Math.round(inp)),
      outputTokens: Math.max(1, Math.round(outp)),
      hashIds: ids.map((x) => Number(x) >>> 0),
    };
    if (typeof o.lora === 'string') req.lora = o.lora;
    if (typeof o.model === 'string') req.model = o.model;
    out.push(req);
  }
  // Stable sort by arrival (traces are sorted; generators too, but be safe).
  return out
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.arrivalMs - b.r.arrivalMs || a.i - b.i)
    .map((x) => x.r);
}

export function loadTrace(path: string, limit = Infinity): SimRequest[] {
  return parseTrace(readFileSync(path, 'utf8'), limit);
}

/** Requests as Mooncake JSONL (the inverse of parseTrace), e.g. to save a generated workload. */
export function toTraceJsonl(reqs: readonly SimRequest[]): string {
  return reqs
    .map((r) => {
      const o: Record<string, unknown> = {
        timestamp: Math.round(r.arrivalMs),
        input_length: r.inputTokens,
        output_length: r.outputTokens,
        hash_ids: r.hashIds,
      };
      if (r.lora !== undefined) o.lora = r.lora;
      if (r.model !== undefined) o.model = r.model;
      return JSON.stringify(o);
    })
    .join('\n') + '\n';
}

// ---------------------------------------------------------------- engine tokens

const VOCAB_BASE = 1000;
const VOCAB_SPAN = 31000;
const blockCache = new Map<number, Uint32Array>();
const BLOCK_CACHE_MAX = 4096; // 4096 × 2 KiB = 8 MiB

/** The 512 token ids of trace block `id` (cached, bounded). */
export function blockTokens(id: number): Uint32Array {
  let b = blockCache.get(id);
  if (b) return b;
  b = new Uint32Array(TRACE_BLOCK_TOKENS);
  const s = mix32(id ^ 0x5bd1e995);
  for (let p = 0; p < TRACE_BLOCK_TOKENS; p++) b[p] = VOCAB_BASE + (hash2(s, p) % VOCAB_SPAN);
  if (blockCache.size >= BLOCK_CACHE_MAX) {
    const first = blockCache.keys().next().value as number;
    blockCache.delete(first);
  }
  blockCache.set(id, b);
  return b;
}

/**
 * The prompt's token ids: block after block, the last cut to inputTokens. If the chain is shorter than
 * inputTokens needs, the missing blocks get ids derived from the last one (deterministically).
 */
export function traceTokens(hashIds: readonly number[], inputTokens: number): Uint32Array {
  const out = new Uint32Array(inputTokens);
  let off = 0;
  for (let k = 0; off < inputTokens; k++) {
    const id = k < hashIds.length ? hashIds[k] : hash2(hashIds[hashIds.length - 1] ?? 0, k) | 0x80000000;
    const b = blockTokens(id >>> 0);
    const n = Math.min(TRACE_BLOCK_TOKENS, inputTokens - off);
    out.set(n === TRACE_BLOCK_TOKENS ? b : b.subarray(0, n), off);
    off += n;
  }
  return out;
}

// ---------------------------------------------------------------- router prefix blocks

/**
 * Router prefix-block hashes for a trace prompt, as if its text (CHARS_PER_TOKEN chars per token) were cut
 * into `blockChars`-char blocks: block k's hash chains the previous hash with the ids of the trace blocks
 * it covers and its offset. Only complete blocks count, at most maxBlocks.
 */
export function tracePrefixBlocks(
  hashIds: readonly number[],
  inputTokens: number,
  blockChars: number,
  maxBlocks: number,
  salt: string | number = 0,
): Uint32Array {
  const chars = inputTokens * CHARS_PER_TOKEN;
  const n = Math.min(maxBlocks, Math.floor(chars / blockChars));
  const out = new Uint32Array(n);
  let h = mix32((typeof salt === 'string' ? hashStr(salt) : salt) ^ 0x27d4eb2f);
  for (let k = 0; k < n; k++) {
    const start = k * blockChars;
    const end = start + blockChars - 1;
    const i0 = Math.floor(start / TRACE_BLOCK_CHARS);
    const i1 = Math.floor(end / TRACE_BLOCK_CHARS);
    const id0 = idAt(hashIds, i0);
    const id1 = i1 === i0 ? id0 : idAt(hashIds, i1);
    h = hash2(h, hash2(hash2(id0, id1), start % TRACE_BLOCK_CHARS));
    out[k] = h;
  }
  return out;
}

function idAt(hashIds: readonly number[], k: number): number {
  return k < hashIds.length ? hashIds[k] : hash2(hashIds[hashIds.length - 1] ?? 0, k) | 0x80000000;
}

// ---------------------------------------------------------------- text for live replay

const textCache = new Map<string, string>();
const TEXT_CACHE_MAX = 2048;
const LETTERS = 'etaoinshrdlcumwfgypbvkjxqz';

/** The fixed text of one trace block (TRACE_BLOCK_CHARS chars of lowercase pseudo-words). */
export function blockText(id: number, seed = 0): string {
  const key = `${seed}:${id}`;
  const hit = textCache.get(key);
  if (hit !== undefined) return hit;
  const rng = new Rng(hash2(seed >>> 0, id >>> 0));
  const parts: string[] = [];
  let len = 0;
  while (len < TRACE_BLOCK_CHARS) {
    const wl = rng.int(2, 6);
    let w = '';
    for (let i = 0; i < wl; i++) w += LETTERS[Math.min(25, Math.floor(rng.float() * rng.float() * 30))];
    w += ' ';
    parts.push(w);
    len += w.length;
  }
  const text = parts.join('').slice(0, TRACE_BLOCK_CHARS);
  if (textCache.size >= TEXT_CACHE_MAX) textCache.delete(textCache.keys().next().value as string);
  textCache.set(key, text);
  return text;
}

/**
 * A prompt text for a trace request: each block id → a seeded pseudo-random text of ~512 tokens
 * (TRACE_BLOCK_CHARS chars), same id → same text; the last block cut so the whole is inputLength tokens
 * at CHARS_PER_TOKEN chars per token. Requests sharing leading ids share a leading text.
 */
export function traceRequestText(hashIds: readonly number[], inputLength: number, seed = 0): string {
  const chars = Math.max(1, inputLength) * CHARS_PER_TOKEN;
  let out = '';
  for (let k = 0; out.length < chars; k++) {
    out += blockText(idAt(hashIds, k), seed);
  }
  return out.slice(0, chars);
}
