/**
 * What a valid config can still get wrong, found before anything starts: files it names that cannot be read
 * (errors), and settings that are legal but dangerous (warnings). `check-config` prints both; `serve`
 * refuses to start on the errors and logs the warnings. The file test is passed in, so the rules are pure.
 */
import type { Config } from './schema.js';

export interface ConfigNotice {
  /** key path, e.g. ['listen', 'tls', 'cert'] */
  path: string[];
  message: string;
}

/** A named file can be read: null, or why not ("ENOENT" → "does not exist", …). */
export type FileCheck = (file: string) => string | null;

/**
 * Every file the config names: the TLS pair and any key ending in `_file` (JWKS, keys, secrets, API keys,
 * CA bundles), wherever it sits, so that a key added later is checked without a change here.
 */
export function referencedFiles(config: Config): Array<{ path: string[]; file: string }> {
  const out: Array<{ path: string[]; file: string }> = [];
  const walk = (v: unknown, path: string[]): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, String(i)]));
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        const here = [...path, k];
        const isFileKey = k.endsWith('_file') || (path.length === 2 && path[0] === 'listen' && path[1] === 'tls' && (k === 'cert' || k === 'key'));
        if (isFileKey && typeof x === 'string') out.push({ path: here, file: x });
        else walk(x, here);
      }
    }
  };
  walk(config, []);
  return out;
}

export function fileProblems(config: Config, check: FileCheck): ConfigNotice[] {
  const out: ConfigNotice[] = [];
  for (const { path, file } of referencedFiles(config)) {
    const why = check(file);
    if (why) out.push({ path, message: `${file}: ${why}` });
  }
  return out;
}

/** The stop grace a container gets by default between SIGTERM and SIGKILL (docker stop). */
export const CONTAINER_STOP_GRACE_MS = 10_000;
/** A non-streamed answer arrives whole: 1,500 tokens at 20 ms/token is 30 s before its first byte (response_timeout). */
export const PLAUSIBLE_WHOLE_ANSWER_MS = 30_000;

export function configWarnings(config: Config): ConfigNotice[] {
  const out: ConfigNotice[] = [];
  const l = config.limits;
  const s = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);
  if (l.drain_timeout > CONTAINER_STOP_GRACE_MS) {
    out.push({
      path: ['limits', 'drain_timeout'],
      message: `${s(l.drain_timeout)} is longer than the ${s(CONTAINER_STOP_GRACE_MS)} a container gets between SIGTERM and SIGKILL by default (docker stop); streams still open then are killed without an error event. Raise the stop grace (docker --stop-timeout, Kubernetes terminationGracePeriodSeconds) above it, or lower it`,
    });
  }
  if (l.response_timeout < PLAUSIBLE_WHOLE_ANSWER_MS) {
    out.push({
      path: ['limits', 'response_timeout'],
      message: `${s(l.response_timeout)}: a non-streamed answer arrives whole, when it is all generated (1,500 tokens at 20 ms/token take 30s), so longer answers are cut with a 504`,
    });
  }
  if (l.request_timeout < l.first_byte_timeout) {
    out.push({ path: ['limits', 'request_timeout'], message: `${s(l.request_timeout)} is shorter than first_byte_timeout (${s(l.first_byte_timeout)}), which then never applies` });
  } else if (l.request_timeout < l.response_timeout) {
    out.push({ path: ['limits', 'request_timeout'], message: `${s(l.request_timeout)} is shorter than response_timeout (${s(l.response_timeout)}), which then never applies` });
  }
  for (const [name, pool] of Object.entries(config.pools)) {
    if (pool.metrics.stale_after < 2 * pool.metrics.interval) {
      out.push({
        path: ['pools', name, 'metrics', 'stale_after'],
        message: `${s(pool.metrics.stale_after)} is under two scrape intervals (${s(pool.metrics.interval)}): one slow scrape makes every endpoint stale and routing falls back to the gateway's own counts`,
      });
    }
    if (pool.saturation.queue_depth === 0 && pool.saturation.kv_cache === 0 && pool.saturation.max_prefill_backlog === 0) {
      out.push({ path: ['pools', name, 'saturation'], message: 'queue_depth, kv_cache and max_prefill_backlog are all 0: this pool never answers 429, overload piles onto the model servers' });
    }
    if (pool.queue.max_length > 0 && pool.queue.max_wait >= l.request_timeout) {
      out.push({
        path: ['pools', name, 'queue', 'max_wait'],
        message: `${s(pool.queue.max_wait)} is not shorter than request_timeout (${s(l.request_timeout)}): a request waiting that long is cut as timed out (504) instead of getting its 429 with Retry-After`,
      });
    }
  }
  return out;
}
