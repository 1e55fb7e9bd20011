/**
 * JSON without recursion. A request body can nest thousands of levels in a few kilobytes; V8's
 * JSON.parse copes, but JSON.stringify and any recursive walk overflow the stack on it. So the gateway
 * measures the nesting of the raw bytes before parsing (and refuses a body nested deeper than its limit),
 * and what must serialise a client's value (prompt rendering of non-text parts) does it with an explicit
 * stack. Pure.
 */

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether the JSON text in `bytes` opens more than `max` objects and arrays inside one another. Brackets
 * inside strings do not count. One pass, no allocation; the text need not be valid JSON (the parser that
 * runs after this says what else is wrong with it).
 */
export function jsonNestedDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) {
      inString = true;
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/** A pending step of stringifyJson: a value to write, or literal text (a separator, a closing bracket). */
type Step = { value: unknown } | string;

/**
 * JSON.stringify's output for a value that came from JSON.parse (objects, arrays, strings, finite numbers,
 * booleans, null), at any depth: the nesting lives on an explicit stack, not the call stack.
 */
export function stringifyJson(value: unknown): string {
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
