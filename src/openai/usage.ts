/**
 * The token usage of an answer, for tenant quotas (tokens_per_minute is charged an estimate at admission
 * and corrected by this): read from a non-streamed JSON answer's `usage`, or from a stream's usage chunk.
 * A stream carries one only when the request asked (`stream_options.include_usage`), so the gateway can
 * ask for it in the forwarded bytes (withIncludeUsage) and take the extra chunk out of what the client
 * receives (SseUsage), which then sees the stream it asked for. Pure.
 */
import { stringifyJson } from './json.js';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** seconds of audio: a speech-to-text answer's usage (`{"type": "duration", "seconds": N}`, vLLM's and OpenAI's), whose tokens are 0 */
  audioSeconds?: number;
}

/** The largest token count believed (the numbers come from a model server). */
const MAX_COUNT = 1e9;

function count(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_COUNT ? v : undefined;
}

/**
 * `usage` of a parsed answer or chunk: both counts must be whole, non-negative numbers; or an audio
 * answer's duration (non-negative seconds, no tokens).
 */
export function usageOf(value: unknown): Usage | null {
  if (value === null || typeof value !== 'object') return null;
  const u = (value as { usage?: unknown }).usage;
  if (u === null || typeof u !== 'object') return null;
  const prompt = count((u as { prompt_tokens?: unknown }).prompt_tokens);
  if (prompt === undefined) {
    const { type, seconds } = u as { type?: unknown; seconds?: unknown };
    if (type !== 'duration' || typeof seconds !== 'number' || !(seconds >= 0 && seconds <= MAX_COUNT)) return null;
    return { promptTokens: 0, completionTokens: 0, audioSeconds: seconds };
  }
  const completion = count((u as { completion_tokens?: unknown }).completion_tokens) ?? 0;
  return { promptTokens: prompt, completionTokens: completion };
}

const USAGE_KEY = Buffer.from('"usage"');
const U = 0x75;

/**
 * Whether `"usage"` occurs in `buf`. Buffer#indexOf with a multi-byte needle costs several times a one-byte
 * search per call (measured here on Node 20), and a stream asks this once per relayed chunk: so the search
 * is for the byte `u` (one or two a chunk: "chunk" has one), each hit checked in place.
 */
export function hasUsageKey(buf: Buffer): boolean {
  const last = buf.length - 6; // the last place a `u` can start `usage"`
  for (let i = buf.indexOf(U, 1); i >= 0 && i <= last; i = buf.indexOf(U, i + 1)) {
    if (buf[i - 1] === 0x22 && buf[i + 1] === 0x73 && buf[i + 2] === 0x61 && buf[i + 3] === 0x67 && buf[i + 4] === 0x65 && buf[i + 5] === 0x22) return true;
  }
  return false;
}

/** Where the last `"usage"` in `buf` starts, or -1 (a search for the byte `u` backwards: see hasUsageKey). */
function lastUsageKey(buf: Buffer): number {
  for (let i = buf.lastIndexOf(U, buf.length - 6); i >= 1; i = buf.lastIndexOf(U, i - 1)) {
    if (buf[i - 1] === 0x22 && buf[i + 1] === 0x73 && buf[i + 2] === 0x61 && buf[i + 3] === 0x67 && buf[i + 4] === 0x65 && buf[i + 5] === 0x22) return i - 1;
  }
  return -1;
}

/**
 * The usage of a whole, non-streamed JSON answer; null when it has none or is not JSON. Where the answer
 * ends with its usage (as vLLM's and OpenAI's do: `…,"usage":{…}}`) only that object is parsed, which
 * costs a fraction of parsing the whole answer (a parse of every answer showed in the gateway's profiles);
 * otherwise the whole answer is.
 */
export function readUsage(body: Buffer | string): Usage | null {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const at = lastUsageKey(bytes);
  if (at < 0) return null;
  const span = trailingUsage(bytes, at);
  try {
    if (span !== null) return usageOf({ usage: JSON.parse(bytes.toString('utf8', span[0], span[1])) });
    return usageOf(JSON.parse(bytes.toString('utf8')));
  } catch {
    return null;
  }
}

/**
 * The byte span of the usage object when `"usage"` at `at` is the key of the last member of the
 * top-level object: in key position (after `{` or `,`), its value an object, then only the closing `}`.
 * In valid JSON that is the top-level `usage` JSON.parse would keep (a `"usage"` inside a string has its
 * opening quote escaped, so `\` precedes it; a nested one is followed by more than one `}`). Null otherwise.
 */
function trailingUsage(bytes: Buffer, at: number): [number, number] | null {
  let p = at - 1;
  while (p >= 0 && isSpace(bytes[p])) p--;
  if (p < 0 || (bytes[p] !== COMMA && bytes[p] !== OPEN_BRACE)) return null;
  let i = skipSpace(bytes, at + USAGE_KEY.length);
  if (bytes[i] !== COLON) return null;
  i = skipSpace(bytes, i + 1);
  if (bytes[i] !== OPEN_BRACE) return null;
  const end = valueEnd(bytes, i);
  if (end < 0) return null;
  const close = skipSpace(bytes, end);
  if (bytes[close] !== CLOSE_BRACE || skipSpace(bytes, close + 1) !== bytes.length) return null;
  return [i, end];
}

// ---------------------------------------------------------------- the request: stream_options.include_usage

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

/** Index of the quote closing the string that opens at bytes[q]; -1 when unterminated. */
function stringEnd(bytes: Buffer, q: number): number {
  for (let i = q + 1; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === BACKSLASH) i++;
    else if (b === QUOTE) return i;
  }
  return -1;
}

/** End (exclusive) of the JSON value starting at bytes[i]. */
function valueEnd(bytes: Buffer, i: number): number {
  const b = bytes[i];
  if (b === QUOTE) return stringEnd(bytes, i) + 1;
  if (b === OPEN_BRACE || b === OPEN_BRACKET) {
    let depth = 0;
    for (let k = i; k < bytes.length; k++) {
      const c = bytes[k];
      if (c === QUOTE) k = stringEnd(bytes, k);
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--depth === 0) return k + 1;
      }
      if (k < 0) return -1;
    }
    return -1;
  }
  let k = i;
  while (k < bytes.length && bytes[k] !== COMMA && bytes[k] !== CLOSE_BRACE && !isSpace(bytes[k])) k++;
  return k;
}

function skipSpace(bytes: Buffer, i: number): number {
  while (i < bytes.length && isSpace(bytes[i])) i++;
  return i;
}

/**
 * Whether the key whose bytes are bytes[start, end) (quotes excluded) is `key` (ASCII), compared in place;
 * undefined when the bytes hold an escape, which only decoding can tell.
 */
function keyIs(bytes: Buffer, start: number, end: number, key: string): boolean | undefined {
  let same = end - start === key.length;
  for (let k = start; k < end; k++) {
    const b = bytes[k];
    if (b === BACKSLASH) return undefined;
    if (same && b !== key.charCodeAt(k - start)) same = false;
  }
  return same;
}

/**
 * Where the top-level object of a valid JSON text opens, and the byte span of the value of its last
 * `key` (ASCII; the one JSON.parse keeps, as Python's json does), or null for the span when the key is absent.
 */
export function topLevelSpan(bytes: Buffer, key: string): { open: number; span: [number, number] | null } | null {
  let i = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  i = skipSpace(bytes, i);
  if (bytes[i] !== OPEN_BRACE) return null;
  const open = i;
  let span: [number, number] | null = null;
  i++;
  for (;;) {
    i = skipSpace(bytes, i);
    if (bytes[i] !== QUOTE) break; // `}` (or not valid JSON)
    const kEnd = stringEnd(bytes, i);
    if (kEnd < 0) return null;
    let matches = keyIs(bytes, i + 1, kEnd, key); // compared in place unless it has an escape
    if (matches === undefined) {
      try {
        matches = JSON.parse(bytes.toString('utf8', i, kEnd + 1)) === key;
      } catch {
        return null;
      }
    }
    i = skipSpace(bytes, kEnd + 1);
    if (bytes[i] !== COLON) return null;
    const vStart = skipSpace(bytes, i + 1);
    const vEnd = valueEnd(bytes, vStart);
    if (vEnd <= vStart) return null;
    if (matches) span = [vStart, vEnd];
    i = skipSpace(bytes, vEnd);
    if (bytes[i] !== COMMA) break;
    i++;
  }
  return { open, span };
}

/**
 * What the gateway does about a streamed request's usage: `client` it asked for the usage chunk itself
 * (pass it on, read it); `added` the forwarded bytes ask for it and the client must not see it (SseUsage
 * with strip); `none` not a stream, or a stream_options the model server will refuse anyway.
 */
export type UsageMode = 'client' | 'added' | 'none';

/**
 * The request bytes to forward so that a stream ends with a usage chunk: `"stream_options":
 * {"include_usage":true}` inserted after the opening brace when absent, or the stream_options object
 * given `include_usage: true` (and vLLM's `continuous_usage_stats` turned off, so no other chunk gains a
 * usage) in place; every other byte as the client sent it. `body` is the parsed `raw`.
 */
export function withIncludeUsage(raw: Buffer, body: Record<string, unknown>): { bytes: Buffer; mode: UsageMode } {
  if (body.stream !== true) return { bytes: raw, mode: 'none' };
  const so = body.stream_options;
  const isObject = so !== null && typeof so === 'object' && !Array.isArray(so);
  if (isObject && (so as { include_usage?: unknown }).include_usage === true) return { bytes: raw, mode: 'client' };
  if (so !== undefined && so !== null && !isObject) return { bytes: raw, mode: 'none' };
  const where = topLevelSpan(raw, 'stream_options');
  if (where === null) return { bytes: raw, mode: 'none' };
  if (where.span === null) {
    if (so !== undefined) return { bytes: raw, mode: 'none' }; // parsed, yet not found: leave the bytes alone
    const after = where.open + 1;
    const empty = raw[skipSpace(raw, after)] === CLOSE_BRACE;
    const insert = Buffer.from(`"stream_options":{"include_usage":true}${empty ? '' : ','}`);
    return { bytes: Buffer.concat([raw.subarray(0, after), insert, raw.subarray(after)]), mode: 'added' };
  }
  const value: Record<string, unknown> = isObject ? { ...(so as Record<string, unknown>) } : {};
  value.include_usage = true;
  if (value.continuous_usage_stats === true) value.continuous_usage_stats = false;
  const [start, end] = where.span;
  return { bytes: Buffer.concat([raw.subarray(0, start), Buffer.from(stringifyJson(value)), raw.subarray(end)]), mode: 'added' };
}

// ---------------------------------------------------------------- the answer: SSE

const LF_LF = Buffer.from('\n\n');
const CRLF_CRLF = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);
/** An incomplete event held back longer than this is passed on as it is (this is no SSE we know). */
const MAX_HELD = 1 << 20;

/** The end (exclusive) of the last complete event in `buf` (after its blank line), 0 when none. */
function lastBoundary(buf: Buffer): number {
  // the usual case, a chunk of whole events: it ends with its blank line (checked without a search)
  const n = buf.length;
  if (n >= 2 && buf[n - 1] === 0x0a && (buf[n - 2] === 0x0a || (n >= 4 && buf[n - 2] === 0x0d && buf[n - 3] === 0x0a && buf[n - 4] === 0x0d))) return n;
  const a = buf.lastIndexOf(LF_LF);
  const b = buf.lastIndexOf(CRLF_CRLF);
  return Math.max(a < 0 ? 0 : a + 2, b < 0 ? 0 : b + 4);
}

/** The end (exclusive) of the event starting at `from`, or buf.length. */
function nextBoundary(buf: Buffer, from: number): number {
  const a = buf.indexOf(LF_LF, from);
  const b = buf.indexOf(CRLF_CRLF, from);
  if (a < 0 && b < 0) return buf.length;
  if (b < 0 || (a >= 0 && a < b)) return a + 2;
  return b + 4;
}

/** The JSON of an event's data lines (joined as SSE joins them), or null. */
function eventJson(event: Buffer): unknown {
  let data = '';
  let any = false;
  for (const line of event.toString('utf8').split(/\r?\n/)) {
    if (!line.startsWith('data:')) continue;
    data += (any ? '\n' : '') + line.slice(line.startsWith('data: ') ? 6 : 5);
    any = true;
  }
  if (!any || !data.startsWith('{')) return null;
  try {
    return JSON.parse(data);
  } catch {
    return null;
  }
}

/**
 * What else a caller may read from an answer as AnswerUsage reads it, without parsing it again (the
 * Responses API's id: gateway/response-affinity.ts). Both are optional; neither may throw.
 */
export interface AnswerHooks {
  /**
   * Each complete SSE event whose data is a JSON object, parsed, with the event's size in bytes, in order,
   * until it returns true (nothing more wanted).
   */
  event?(data: unknown, bytes: number): boolean;
  /** The whole non-SSE answer at its end, when it was kept (at most 1 MiB). */
  whole?(answer: Buffer): void;
}

/**
 * Reads the usage chunk of an OpenAI SSE answer as it passes. With `strip`, the usage-only chunk
 * (`"choices":[]` with a `usage`) is taken out of the bytes handed on, so events are handed on whole
 * (an incomplete one waits for its end, which the client could not use before either). Without, every
 * byte goes on at once and only a copy of the incomplete tail is kept for reading. `onEvent` (optional)
 * is told each complete event's parsed data until it returns true.
 */
export class SseUsage {
  usage: Usage | null = null;
  private held: Buffer = EMPTY;
  private onEvent: ((data: unknown, bytes: number) => boolean) | undefined;

  constructor(
    readonly strip: boolean,
    onEvent?: (data: unknown, bytes: number) => boolean,
  ) {
    this.onEvent = onEvent;
  }

  /** The bytes to hand on now for `chunk` (EMPTY when all of it waits). */
  push(chunk: Buffer): Buffer {
    const buf = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk;
    const cut = lastBoundary(buf);
    this.held = cut < buf.length ? Buffer.from(buf.subarray(cut)) : EMPTY;
    if (this.held.length > MAX_HELD) {
      // no event ends: not an SSE stream as we know it; nothing more is held
      const out = this.strip ? buf : chunk;
      this.held = EMPTY;
      return out;
    }
    const complete = cut === buf.length ? buf : buf.subarray(0, cut);
    if (this.onEvent !== undefined && complete.length > 0) this.tell(complete);
    const kept = hasUsageKey(complete) ? this.read(complete) : complete;
    if (!this.strip) return chunk;
    return kept;
  }

  /** The stream ended: what is still held (an unfinished last event) goes on as it is. */
  end(): Buffer {
    const rest = this.held;
    this.held = EMPTY;
    return this.strip ? rest : EMPTY;
  }

  /** Hands complete events to onEvent until it has had enough. */
  private tell(complete: Buffer): void {
    let start = 0;
    while (start < complete.length && this.onEvent !== undefined) {
      const end = nextBoundary(complete, start);
      const json = eventJson(complete.subarray(start, end));
      if (json !== null && this.onEvent(json, end - start)) this.onEvent = undefined;
      start = end;
    }
  }

  /** Reads the usage out of complete events; returns them without the usage-only one when stripping. */
  private read(complete: Buffer): Buffer {
    const parts: Buffer[] = [];
    let dropped = false;
    let start = 0;
    while (start < complete.length) {
      const end = nextBoundary(complete, start);
      const event = complete.subarray(start, end);
      start = end;
      if (hasUsageKey(event)) {
        const json = eventJson(event);
        const usage = usageOf(json);
        if (usage) {
          this.usage = usage;
          const choices = (json as { choices?: unknown }).choices;
          if (this.strip && Array.isArray(choices) && choices.length === 0) {
            dropped = true;
            continue;
          }
        }
      }
      parts.push(event);
    }
    return dropped ? Buffer.concat(parts) : complete;
  }
}

/** Past this, a non-streamed answer is not kept for its usage (the relay gathers up to 1 MiB too). */
const MAX_KEPT_JSON = 1 << 20;

/**
 * One answer's usage as it is relayed, whatever its kind: an SSE answer through SseUsage (stripping the
 * usage chunk when the gateway asked for it: mode `added`), any other answer kept (up to 1 MiB, by
 * reference: the relay holds the same buffers) and read at the end with readUsage. `data` returns the
 * bytes to relay for a chunk (may be empty: relay nothing then), `end` what is left to relay. `hooks`
 * read more of the answer from the same events and the same kept bytes (AnswerHooks).
 */
export class AnswerUsage {
  private readonly sse: SseUsage | undefined;
  private kept: Buffer[] | null = [];
  private keptBytes = 0;
  private result: Usage | null = null;
  private readonly hooks: AnswerHooks | undefined;

  constructor(mode: UsageMode, sse: boolean, hooks?: AnswerHooks) {
    this.hooks = hooks;
    const onEvent = hooks?.event;
    this.sse = sse ? new SseUsage(mode === 'added', onEvent && ((data, bytes) => onEvent.call(hooks, data, bytes))) : undefined;
    if (sse) this.kept = null;
  }

  data(chunk: Buffer): Buffer {
    if (this.sse) return this.sse.push(chunk);
    if (this.kept) {
      this.keptBytes += chunk.length;
      if (this.keptBytes <= MAX_KEPT_JSON) this.kept.push(chunk);
      else this.kept = null;
    }
    return chunk;
  }

  end(): Buffer {
    if (this.sse) {
      const rest = this.sse.end();
      this.result = this.sse.usage;
      return rest;
    }
    if (this.kept) {
      const whole = this.kept.length === 1 ? this.kept[0] : Buffer.concat(this.kept);
      this.result = readUsage(whole);
      this.hooks?.whole?.(whole);
    }
    this.kept = null;
    return EMPTY;
  }

  /** The answer's usage once `end` was called; null when it had none. */
  get usage(): Usage | null {
    return this.result ?? this.sse?.usage ?? null;
  }
}
