/** Durations ("250ms", "2s", "1m", "1h") and sizes ("4mb", "512kb", bytes) as users write them. */

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/;
const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds for a duration string, or null when it is not one. A bare number is milliseconds. */
export function parseDuration(v: string | number): number | null {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 ? v : null;
  const m = DURATION.exec(v.trim());
  if (!m) return null;
  return Number(m[1]) * DURATION_MS[m[2]];
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|kib|mib|gib)?$/i;
const SIZE_BYTES: Record<string, number> = {
  b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3,
};

/** Bytes for a size string ("4mb", "512kb", "1048576"), or null when it is not one. */
export function parseSize(v: string | number): number | null {
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 ? v : null;
  const m = SIZE.exec(v.trim());
  if (!m) return null;
  return Math.floor(Number(m[1]) * SIZE_BYTES[(m[2] ?? 'b').toLowerCase()]);
}
