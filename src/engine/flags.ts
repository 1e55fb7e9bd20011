/**
 * The engine's command-line flags, shared by `infergate mock` and `infergate simulate` so that both take
 * the same profile the same way (parsing only: no I/O).
 */
import type { EngineProfile } from './profile.js';

/** `node:util` parseArgs options for the engine flags. */
export const ENGINE_FLAG_OPTIONS = {
  lora: { type: 'string' },
  'max-loras': { type: 'string' },
  'max-num-seqs': { type: 'string' },
  'max-num-batched-tokens': { type: 'string' },
  'kv-blocks': { type: 'string' },
  'block-size': { type: 'string' },
  'prefill-tokens-per-s': { type: 'string' },
  'decode-ms': { type: 'string' },
  'decode-ms-per-seq': { type: 'string' },
  'lora-load-ms': { type: 'string' },
  'max-model-len': { type: 'string' },
} as const;

export const ENGINE_FLAGS_HELP = `  --lora a,b                   LoRA adapters served (as models whose parent is the base model)
  --max-loras N                adapters resident at once (default 1)
  --max-num-seqs N             running batch size (default 256)
  --max-num-batched-tokens N   per-step token budget, chunked prefill (default 8192)
  --kv-blocks N                KV cache blocks (default 25000)
  --block-size N               tokens per block (default 16)
  --prefill-tokens-per-s X     prefill throughput (default 16000)
  --decode-ms X                decode step at batch 1, ms (default 11, + 1 ms step overhead)
  --decode-ms-per-seq X        added per running sequence, ms (default 0.07)
  --lora-load-ms X             adapter load time, ms (default 30)
  --max-model-len N            context limit (default 131072)`;

/** A number flag, or undefined when absent; an Error naming the flag when it is not a valid value. */
export function numberFlag(name: string, v: string | undefined, opts: { int?: boolean; min?: number; max?: number } = {}): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  const bad = v.trim() === '' || !Number.isFinite(n) || (opts.int && !Number.isInteger(n)) || (opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max);
  if (bad) {
    const range = [opts.min !== undefined ? `≥ ${opts.min}` : '', opts.max !== undefined ? `≤ ${opts.max}` : ''].filter(Boolean).join(' and ');
    throw new Error(`--${name} must be ${opts.int ? 'an integer' : 'a number'}${range ? ` ${range}` : ''}, not ${JSON.stringify(v)}`);
  }
  return n;
}

/** The profile overrides given on the command line (absent flags keep the engine's defaults). */
export function engineProfileFromFlags(values: Partial<Record<keyof typeof ENGINE_FLAG_OPTIONS, string>>): Partial<EngineProfile> {
  const p: Partial<EngineProfile> = {};
  const set = <K extends keyof EngineProfile>(key: K, v: EngineProfile[K] | undefined) => {
    if (v !== undefined) p[key] = v;
  };
  if (values.lora !== undefined) p.loras = values.lora.split(',').map((s) => s.trim()).filter(Boolean);
  set('maxLoras', numberFlag('max-loras', values['max-loras'], { int: true, min: 0 }));
  set('maxNumSeqs', numberFlag('max-num-seqs', values['max-num-seqs'], { int: true, min: 1 }));
  set('maxNumBatchedTokens', numberFlag('max-num-batched-tokens', values['max-num-batched-tokens'], { int: true, min: 1 }));
  set('numGpuBlocks', numberFlag('kv-blocks', values['kv-blocks'], { int: true, min: 1 }));
  set('blockSize', numberFlag('block-size', values['block-size'], { int: true, min: 1, max: 4095 }));
  set('prefillTokensPerS', numberFlag('prefill-tokens-per-s', values['prefill-tokens-per-s'], { min: 1e-9 }));
  set('decodeMs', numberFlag('decode-ms', values['decode-ms'], { min: 0 }));
  set('decodeMsPerSeq', numberFlag('decode-ms-per-seq', values['decode-ms-per-seq'], { min: 0 }));
  set('loraLoadMs', numberFlag('lora-load-ms', values['lora-load-ms'], { min: 0 }));
  set('maxModelLen', numberFlag('max-model-len', values['max-model-len'], { int: true, min: 1 }));
  return p;
}
