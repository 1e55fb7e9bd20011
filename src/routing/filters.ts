/**
 * The filters before a pick is scored: endpoints excluded by the caller (already failed for this request),
 * endpoints ejected after errors (unless every one is: never fail closed on our own guess), and, for a
 * LoRA-adapter request, endpoints known not to serve the adapter (unless that leaves none). Also which model
 * names are adapters, as the endpoints' signals tell.
 */
import type { EndpointState } from './endpoint-state.js';

/** Endpoints left out of a pick, and why (explain only). */
export type Filtered = Array<{ endpoint: string; why: string }>;

/** The endpoints a pick may use, written into `out` (or the ejected ones, when every usable one is). */
export function usable(
  states: readonly EndpointState[],
  exclude: ReadonlySet<string> | undefined,
  now: number,
  out: EndpointState[],
  filtered: Filtered | null,
): EndpointState[] {
  out.length = 0;
  let ejected: EndpointState[] | null = null;
  for (const st of states) {
    if (exclude?.has(st.name)) {
      filtered?.push({ endpoint: st.name, why: 'excluded' });
      continue;
    }
    if (st.ejectedUntil > now) {
      (ejected ??= []).push(st);
      continue;
    }
    out.push(st);
  }
  if (out.length === 0 && ejected) return ejected; // never fail closed on our own ejections
  if (ejected && filtered) for (const st of ejected) filtered.push({ endpoint: st.name, why: 'ejected' });
  return out;
}

/** Of `list`, those that serve `adapter` or whose adapters are unknown; all of `list` if none or all do. */
export function servingAdapter(list: EndpointState[], adapter: string, filtered: Filtered | null): EndpointState[] {
  const ok = list.filter((st) => !st.sig?.adapters || st.sig.adapters.includes(adapter));
  if (ok.length === 0 || ok.length === list.length) return list;
  if (filtered) for (const st of list) if (!ok.includes(st)) filtered.push({ endpoint: st.name, why: 'adapter not served' });
  return ok;
}

/** The model names the endpoints of a pool report as LoRA adapters, rebuilt lazily when signals change. */
export class AdapterCatalog {
  private names = new Set<string>();
  private dirty = false;

  /** The signals (or the endpoint list) changed in a way that may change the adapter names. */
  invalidate(): void {
    this.dirty = true;
  }

  isAdapter(model: string, states: readonly EndpointState[]): boolean {
    if (this.dirty) {
      this.names.clear();
      for (const st of states) {
        const s = st.sig;
        if (!s) continue;
        if (s.adapters) for (const a of s.adapters) this.names.add(a);
        for (const a of s.loraRunning) this.names.add(a);
        for (const a of s.loraWaiting) this.names.add(a);
      }
      this.dirty = false;
    }
    return this.names.size > 0 && this.names.has(model);
  }
}
