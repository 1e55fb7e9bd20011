/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a client sends is continued,
 * a missing or malformed one starts a new trace, and the model server is sent the same trace id with the
 * gateway's own span id as its parent. Junk is never passed on: a malformed traceparent is replaced, and
 * its `tracestate` dropped with it (the spec ties the two). Pure but for the random ids.
 */
import { randomFillSync } from 'node:crypto';

export interface TraceParent {
  /** 32 lower-case hex digits, not all zero */
  traceId: string;
  /** the caller's span: 16 lower-case hex digits, not all zero */
  parentId: string;
  /** the trace flags byte; bit 0 = sampled */
  flags: number;
}

/** version-traceid-parentid-flags, then for a version after 00 whatever it adds after a dash */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^]*)?$/;
const ALL_ZERO = /^0+$/;
/** a header longer than this is not a traceparent any version would send */
const MAX_LENGTH = 512;

/** The header's fields, or null when it is absent or not valid (version ff, an all-zero id, upper case…). */
export function parseTraceparent(value: string | undefined): TraceParent | null {
  if (value === undefined || value.length < 55 || value.length > MAX_LENGTH) return null;
  const m = TRACEPARENT.exec(value);
  if (m === null) return null;
  const version = m[1];
  if (version === 'ff') return null;
  // version 00 is exactly 55 characters; a later version may append fields, which we do not read
  if (version === '00' && m[5] !== undefined) return null;
  if (ALL_ZERO.test(m[2]) || ALL_ZERO.test(m[3])) return null;
  return { traceId: m[2], parentId: m[3], flags: parseInt(m[4], 16) };
}

/** The version-00 header for a span of this trace. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
}

// random ids, cut from a pool refilled 4 KiB at a time (one system call per ~170 requests)
const pool = Buffer.allocUnsafe(4096);
let at = pool.length;

function randomHex(bytes: number): string {
  for (;;) {
    if (at + bytes > pool.length) {
      randomFillSync(pool);
      at = 0;
    }
    const hex = pool.toString('hex', at, at + bytes);
    at += bytes;
    if (!ALL_ZERO.test(hex)) return hex; // an all-zero id is invalid
  }
}

export function newTraceId(): string {
  return randomHex(16);
}

export function newSpanId(): string {
  return randomHex(8);
}
