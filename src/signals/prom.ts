/**
 * A small Prometheus text-format (0.0.4) parser. Pure.
 *
 * Handles comments (# HELP / # TYPE / others), label values with escapes (\\ \" \n), NaN, +Inf, -Inf,
 * optional timestamps, histogram/summary series (they are just samples named *_bucket, *_sum, *_count),
 * CRLF line ends. Malformed lines are skipped, never thrown on. `wanted` limits the work to the metric
 * names you need: other lines are skipped after reading their name.
 */

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export type Families = Map<string, Sample[]>;

function parseValue(s: string): number {
  switch (s) {
    case 'NaN':
      return NaN;
    case '+Inf':
    case 'Inf':
      return Infinity;
    case '-Inf':
      return -Infinity;
    default: {
      if (s.length === 0) return NaN;
      const v = Number(s);
      return v;
    }
  }
}

function isNameChar(c: number): boolean {
  return (
    (c >= 97 && c <= 122) || // a-z
    (c >= 65 && c <= 90) || // A-Z
    (c >= 48 && c <= 57) || // 0-9
    c === 95 || // _
    c === 58 // :
  );
}

export function parsePrometheus(text: string, wanted?: ReadonlySet<string>): Families {
  const out: Families = new Map();
  const len = text.length;
  let pos = 0;
  while (pos < len) {
    let eol = text.indexOf('\n', pos);
    if (eol < 0) eol = len;
    let end = eol;
    if (end > pos && text.charCodeAt(end - 1) === 13) end--;
    const lineStart = pos;
    pos = eol + 1;
    // skip leading blanks
    let i = lineStart;
    while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i++;
    if (i >= end || text.charCodeAt(i) === 35 /* # */) continue;
    const nameStart = i;
    while (i < end && isNameChar(text.charCodeAt(i))) i++;
    if (i === nameStart) continue;
    const name = text.slice(nameStart, i);
    if (wanted && !wanted.has(name)) continue;
    const labels: Record<string, string> = {};
    if (i < end && text.charCodeAt(i) === 123 /* { */) {
      i++;
      let ok = false;
      for (;;) {
        while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 44)) i++; // spaces, commas
        if (i >= end) break;
        if (text.charCodeAt(i) === 125 /* } */) {
          i++;
          ok = true;
          break;
        }
        const ls = i;
        while (i < end && isNameChar(text.charCodeAt(i))) i++;
        const lname = text.slice(ls, i);
        while (i < end && text.charCodeAt(i) === 32) i++;
        if (lname.length === 0 || text.charCodeAt(i) !== 61 /* = */) break;
        i++;
        while (i < end && text.charCodeAt(i) === 32) i++;
        if (text.charCodeAt(i) !== 34 /* " */) break;
        i++;
        let val = '';
        let segStart = i;
        let closed = false;
        while (i < end) {
          const c = text.charCodeAt(i);
          if (c === 92 /* \ */ && i + 1 < end) {
            val += text.slice(segStart, i);
            const n = text.charCodeAt(i + 1);
            val += n === 110 ? '\n' : String.fromCharCode(n);
            i += 2;
            segStart = i;
            continue;
          }
          if (c === 34) {
            val += text.slice(segStart, i);
            i++;
            closed = true;
            break;
          }
          i++;
        }
        if (!closed) break;
        labels[lname] = val;
      }
      if (!ok) continue;
    }
    // value [timestamp]
    while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i++;
    let ve = i;
    while (ve < end && text.charCodeAt(ve) !== 32 && text.charCodeAt(ve) !== 9) ve++;
    const value = parseValue(text.slice(i, ve));
    if (Number.isNaN(value) && text.slice(i, ve) !== 'NaN') continue;
    let fam = out.get(name);
    if (!fam) {
      fam = [];
      out.set(name, fam);
    }
    fam.push({ labels, value });
  }
  return out;
}
