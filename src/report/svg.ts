/**
 * Hand-written SVG line charts (no chart library): axes with round, labelled ticks (a log x axis gets 1-2-5
 * ticks per decade, or plain round ticks when its range is under a decade), grid lines, a legend. Pure.
 */

export interface Series { name: string; points: Array<[number, number]>; color?: string; step?: boolean }

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  xLog?: boolean;
  yMin?: number;
  yMax?: number;
}

export const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Round tick values covering [lo, hi] (about `count` of them). */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9 && out.length < 50; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function fmt(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toPrecision(3).replace(/\.?0+$/, '')}M`;
  if (a >= 1e4) return `${(v / 1e3).toPrecision(3).replace(/\.?0+$/, '')}k`;
  if (a === 0 || a >= 1) return String(Number(v.toPrecision(4)));
  return String(Number(v.toPrecision(2)));
}

export function lineChart(series: Series[], o: ChartOptions): string {
  const W = o.width ?? 640;
  const H = o.height ?? 320;
  const m = { l: 58, r: 150, t: 28, b: 44 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0));
  let xMin = Math.min(...all.map((p) => p[0]));
  let xMax = Math.max(...all.map((p) => p[0]));
  let yMin = o.yMin ?? Math.min(0, ...all.map((p) => p[1]));
  let yMax = o.yMax ?? Math.max(...all.map((p) => p[1]));
  if (!all.length) { xMin = o.xLog ? 1 : 0; xMax = o.xLog ? 10 : 1; yMin = 0; yMax = 1; }
  if (!(xMax > xMin)) xMax = xMin + (o.xLog ? xMin * 9 || 1 : 1);
  if (!(yMax > yMin)) yMax = yMin + 1;
  const lx = (x: number): number => (o.xLog ? Math.log10(x) : x);
  const X = (x: number): number => m.l + ((lx(x) - lx(xMin)) / (lx(xMax) - lx(xMin))) * pw;
  const Y = (y: number): number => m.t + ph - ((y - yMin) / (yMax - yMin)) * ph;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11" role="img" aria-label="${escapeXml(o.title)}">`);
  parts.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="#fff"/>`);
  parts.push(`<text x="${m.l}" y="16" font-size="13" font-weight="bold">${escapeXml(o.title)}</text>`);
  // Grid and ticks.
  let xt: number[];
  if (o.xLog) {
    xt = [];
    for (let e = Math.floor(Math.log10(xMin)); e <= Math.ceil(Math.log10(xMax)); e++) for (const k of [1, 2, 5]) { const v = k * 10 ** e; if (v >= xMin && v <= xMax) xt.push(v); }
    if (xt.length < 3) xt = niceTicks(xMin, xMax, 4).filter((v) => v >= xMin && v > 0);
  } else xt = niceTicks(xMin, xMax, 6);
  for (const v of xt) {
    const x = X(v).toFixed(1);
    parts.push(`<line x1="${x}" y1="${m.t}" x2="${x}" y2="${m.t + ph}" stroke="#eee"/><line class="tick" x1="${x}" y1="${m.t + ph}" x2="${x}" y2="${m.t + ph + 4}" stroke="#666"/><text x="${x}" y="${m.t + ph + 15}" text-anchor="middle">${fmt(v)}</text>`);
  }
  for (const v of niceTicks(yMin, yMax, 5)) {
    const y = Y(v).toFixed(1);
    parts.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#eee"/><line class="tick" x1="${m.l - 4}" y1="${y}" x2="${m.l}" y2="${y}" stroke="#666"/><text x="${m.l - 7}" y="${y}" text-anchor="end" dominant-baseline="middle">${fmt(v)}</text>`);
  }
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
  parts.push(`<text x="${m.l + pw / 2}" y="${H - 8}" text-anchor="middle">${escapeXml(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(14 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${escapeXml(o.yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length];
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0));
    if (pts.length) {
      let d = '';
      pts.forEach(([x, y], j) => {
        const px = X(x).toFixed(1);
        const py = Y(y).toFixed(1);
        if (j === 0) d += `M${px} ${py}`;
        else if (s.step) d += `H${px}V${py}`;
        else d += `L${px} ${py}`;
      });
      parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.6"><title>${escapeXml(s.name)}</title></path>`);
    }
    const ly = m.t + 10 + i * 16;
    parts.push(`<line x1="${m.l + pw + 10}" y1="${ly}" x2="${m.l + pw + 28}" y2="${ly}" stroke="${color}" stroke-width="3"/><text x="${m.l + pw + 32}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/** Empirical CDF points of `values` (at most `maxPoints`, evenly spaced in rank). */
export function cdfPoints(values: number[], maxPoints = 400): Array<[number, number]> {
  const s = [...values].sort((a, b) => a - b);
  const n = s.length;
  if (!n) return [];
  const step = Math.max(1, Math.floor(n / maxPoints));
  const pts: Array<[number, number]> = [];
  for (let i = 0; i < n; i += step) pts.push([s[i], (i + 1) / n]);
  if (pts[pts.length - 1][1] !== 1) pts.push([s[n - 1], 1]);
  return pts;
}
