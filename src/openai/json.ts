/**
 * JSON as a request body arrives. A body can nest thousands of levels in a few kilobytes; V8's
 * JSON.parse copes, but JSON.stringify and any recursive walk overflow the stack on it. So the gateway
 * scans the raw bytes before parsing (nesting against its limit, duplicated keys it acts on, where the
 * model name is, so an alias rewrite changes those bytes alone), and what must serialise a client's value
 * (prompt rendering of non-text parts) does it with an explicit stack. Pure.
 */

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** What one pass over a request body's bytes tells before it is parsed. */
export interface JsonShape {
  /** objects and arrays open inside one another deeper than the limit (the scan stopped there) */
  tooDeep: boolean;
  /** a top-level key of ACTED_ON that appears more than once, else null */
  duplicate: string | null;
  /** the byte span of the last top-level "model" value, quotes included, when it is a string; else -1 */
  modelStart: number;
  modelEnd: number;
}

/**
 * The top-level keys the gateway acts on (routing, the gather-or-stream decision, the prompt it hashes):
 * each may appear once, so that the gateway and the model server can never read different values.
 */
export const ACTED_ON: readonly string[] = ['model', 'stream', 'messages', 'prompt'];

/**
 * One pass over the JSON text in `bytes` (strings skipped with Buffer's native search), no allocation per byte: its nesting depth against `max`
 * (brackets inside strings do not count), duplicates among the top-level keys the gateway acts on
 * (an escaped key such as "mod\u0065l" is decoded first), and where the top-level "model" string is.
 * The text need not be valid JSON: the parser that runs after this says what else is wrong with it.
 */
export function scanJson(bytes: Buffer, max: number): JsonShape {
  const shape: JsonShape = { tooDeep: false, duplicate: null, modelStart: -1, modelEnd: -1 };
  let depth = 0;
  let seen = 0; // bit i: ACTED_ON[i] was a key already
  // in the top-level object: whether the next string is a key, and which acted-on key the last one was
  let keyNext = false;
  let lastKey = -1;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    let b = bytes[i];
    if (depth >= 2 && PLAIN[b] === 1) {
      // inside a nested value only quotes and brackets matter: the rest (a token-id list's digits and
      // commas) is passed over in a tight loop, about a third of the branchy loop's time per byte
      do i++;
      while (i < n && PLAIN[bytes[i]] === 1);
      if (i === n) break;
      b = bytes[i];
    }
    if (b === QUOTE) {
      // to the closing quote: a native search, then a look back for the backslashes that escape it
      const start = i;
      let end = bytes.indexOf(QUOTE, i + 1);
      while (end > 0 && escapedAt(bytes, end)) end = bytes.indexOf(QUOTE, end + 1);
      if (end < 0) break; // unterminated: the parser refuses the body
      i = end;
      if (depth !== 1) continue;
      if (keyNext) {
        keyNext = false;
        lastKey = actedOnIndex(bytes, start, i + 1);
        if (lastKey >= 0) {
          if (seen & (1 << lastKey)) {
            if (shape.duplicate === null) shape.duplicate = ACTED_ON[lastKey];
          } else seen |= 1 << lastKey;
        }
      } else if (lastKey === 0) {
        shape.modelStart = start;
        shape.modelEnd = i + 1;
      }
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (++depth > max) {
        shape.tooDeep = true;
        return shape;
      }
      if (depth === 1) keyNext = b === OPEN_BRACE;
      else if (depth === 2 && lastKey === 0) shape.modelStart = shape.modelEnd = -1; // model is not a string
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      depth--;
    } else if (depth === 1 && b === COMMA) {
      keyNext = true;
      lastKey = -1;
    } else if (depth === 1 && lastKey === 0 && b > SPACE && b !== COLON) {
      shape.modelStart = shape.modelEnd = -1; // a number, true, false or null: not a string
    }
  }
  return shape;
}

/** 1 for each byte that is neither a quote nor a bracket or brace */
const PLAIN = new Uint8Array(256).fill(1);
for (const c of [QUOTE, OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET]) PLAIN[c] = 0;

const COMMA = 0x2c;
const COLON = 0x3a;
const SPACE = 0x20;

/** Whether the quote at bytes[q] is escaped: an odd number of backslashes right before it. */
function escapedAt(bytes: Uint8Array, q: number): boolean {
  let k = q - 1;
  while (k >= 0 && bytes[k] === BACKSLASH) k--;
  return ((q - 1 - k) & 1) === 1;
}

/** Which ACTED_ON key the string token bytes[start, end) (quotes included) is, or -1. */
function actedOnIndex(bytes: Buffer, start: number, end: number): number {
  const backslash = bytes.indexOf(BACKSLASH, start);
  if (backslash >= 0 && backslash < end) {
    let key: unknown;
    try {
      key = JSON.parse(bytes.toString('utf8', start, end));
    } catch {
      return -1; // not a valid string: the parser will refuse the body
    }
    return ACTED_ON.indexOf(key as string);
  }
  const len = end - start - 2;
  for (let k = 0; k < ACTED_ON.length; k++) {
    const name = ACTED_ON[k];
    if (name.length !== len) continue;
    let same = true;
    for (let j = 0; j < len; j++) {
      if (bytes[start + 1 + j] !== name.charCodeAt(j)) {
        same = false;
        break;
      }
    }
    if (same) return k;
  }
  return -1;
}

/** A pending step of stringifyJson: a value to write, or literal text (a separator, a closing bracket). */
type Step = { value: unknown } | string;

/**
 * JSON.stringify's output for a value that came from JSON.parse (objects, arrays, strings, finite numbers,
 * booleans, null), at any depth: the nesting lives on an explicit stack, not the call stack.
 */
export function stringifyJson(value: unknown): string {
  // V8's own serialiser is about 20× faster (a 5 MB token-id prompt: 21 ms against 470): it serves every
  // value it can, and the explicit stack only those nested too deep for it
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
  }
  return stringifyDeep(value);
}

/** stringifyJson's explicit-stack serialiser (exported for its tests). */
export function stringifyDeep(value: unknown): string {
  let out = '';
  const stack: Step[] = [{ value }];
  while (stack.length > 0) {
    const step = stack.pop()!;
    if (typeof step === 'string') {
      out += step;
      continue;
    }
    const v = step.value;
    if (v === null || typeof v !== 'object') {
      out += JSON.stringify(v) ?? 'null';
    } else if (Array.isArray(v)) {
      // pushed in reverse: the stack pops them in order
      stack.push(']');
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] === undefined ? null : v[i] });
        if (i > 0) stack.push(',');
      }
      out += '[';
    } else {
      const keys = Object.keys(v);
      stack.push('}');
      let first = true;
      const items: Step[] = [];
      for (const k of keys) {
        const x = (v as Record<string, unknown>)[k];
        if (x === undefined || typeof x === 'function') continue;
        items.push(`${first ? '' : ','}${JSON.stringify(k)}:`, { value: x });
        first = false;
      }
      for (let i = items.length - 1; i >= 0; i--) stack.push(items[i]);
      out += '{';
    }
  }
  return out;
}

/**
 * stringifyJson(value).length, without making the text for a number (a token id) and without a
 * stack-free walk of its own: a value that is not a number is serialised natively and measured. Used to
 * count a prompt's length past the part the gateway renders (prompt.ts: renderPromptHead).
 */
export function jsonLength(value: unknown): number {
  return typeof value === 'number' ? numberLength(value) : stringifyJson(value).length;
}

/** JSON.stringify(x).length for a number: a token id's digits counted by comparisons, others serialised. */
function numberLength(x: number): number {
  if ((x | 0) === x && x >= 0) {
    // prettier-ignore
    return x < 10 ? 1 : x < 100 ? 2 : x < 1e3 ? 3 : x < 1e4 ? 4 : x < 1e5 ? 5 : x < 1e6 ? 6 : x < 1e7 ? 7 : x < 1e8 ? 8 : x < 1e9 ? 9 : 10;
  }
  return (JSON.stringify(x) ?? 'null').length;
}
