/** Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`) into the top functions by self time. */
import { readFileSync } from 'node:fs';
import { round } from './common.js';

interface CpuNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[] }
interface CpuProfile { nodes: CpuNode[]; startTime: number; endTime: number; samples?: number[]; timeDeltas?: number[] }

/** self_pct: share of the busy (non-idle) samples */
export interface TopFunction { function: string; where: string; self_pct: number; self_ms: number }

export function topFunctions(file: string, limit = 25): { total_ms: number; idle_pct: number; top: TopFunction[]; by_area: Record<string, number> } {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const total = prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0) || 1;
  const totalMs = (prof.endTime - prof.startTime) / 1000;
  const msPerHit = totalMs / total;
  const agg = new Map<string, { fn: string; where: string; hits: number }>();
  const areas: Record<string, number> = {};
  let idle = 0;
  for (const n of prof.nodes) {
    const hits = n.hitCount ?? 0;
    if (!hits) continue;
    const fn = n.callFrame.functionName || '(anonymous)';
    const url = n.callFrame.url.replace(/^file:\/\//, '');
    if (fn === '(idle)') idle += hits;
    const where = url ? `${url.replace(/.*\/(node_modules|dist-bench|dist)\//, '$1/')}:${n.callFrame.lineNumber + 1}` : '';
    const key = `${fn}@${where}`;
    const e = agg.get(key) ?? { fn, where, hits: 0 };
    e.hits += hits;
    agg.set(key, e);
    const area = fn === '(idle)' ? 'idle'
      : fn === '(garbage collector)' ? 'gc'
      : /undici/.test(url) ? 'undici'
      : /uWebSockets|uws/i.test(url) ? 'uws'
      : /\/src\/|dist\/|dist-bench\//.test(url) ? 'infergate'
      : /node_modules/.test(url) ? 'other node_modules'
      : url.startsWith('node:') ? 'node core'
      : 'native/other';
    areas[area] = (areas[area] ?? 0) + hits;
  }
  // Percentages are of busy (non-idle) samples: the profile spans the whole run, idle phases included.
  const busy = Math.max(1, total - idle);
  const top = [...agg.values()]
    .filter((e) => e.fn !== '(idle)')
    .sort((a, b) => b.hits - a.hits)
    .slice(0, limit)
    .map((e) => ({ function: e.fn, where: e.where, self_pct: round((100 * e.hits) / busy, 2), self_ms: round(e.hits * msPerHit, 1) }));
  const byArea: Record<string, number> = {};
  for (const [k, v] of Object.entries(areas)) if (k !== 'idle') byArea[k] = round((100 * v) / busy, 2);
  return { total_ms: round(totalMs, 1), idle_pct: round((100 * idle) / total, 2), top, by_area: byArea };
}
