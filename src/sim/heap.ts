/**
 * The event queue: a binary min-heap on (time, kind, seq). `kind` orders simultaneous events (step ends
 * before scrapes before arrivals) and `seq` (insertion order) breaks the remaining ties, so the order of
 * simultaneous events never depends on the heap's internals: runs are reproducible to the byte.
 */
export interface SimEvent {
  t: number;
  kind: number;
  seq: number;
  /** endpoint index or request index */
  a: number;
}

export class EventQueue {
  private h: SimEvent[] = [];
  private seq = 0;

  get size(): number {
    return this.h.length;
  }

  push(t: number, kind: number, a: number): void {
    const e: SimEvent = { t, kind, seq: this.seq++, a };
    const h = this.h;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(e, h[p])) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
  }

  pop(): SimEvent | undefined {
    const h = this.h;
    if (h.length === 0) return undefined;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      const n = h.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && less(h[r], h[l]) ? r : l;
        if (!less(h[c], last)) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

function less(a: SimEvent, b: SimEvent): boolean {
  return a.t < b.t || (a.t === b.t && (a.kind < b.kind || (a.kind === b.kind && a.seq < b.seq)));
}
