/**
 * The last routing decisions, for /debug/decisions and the status page: a fixed-size ring the gateway
 * feeds from each pick's explanation (routing/explain.ts). Pure data: no clock of its own (the caller
 * stamps each entry), memory bounded by `admin.decisions` entries.
 */
import type { PickExplain } from '../routing/index.js';

export interface Decision {
  /** Date.now() at the pick */
  at: number;
  req_id: string;
  pool: string;
  model: string;
  /** 'ok' (an endpoint chosen), 'saturated' (429), 'unavailable' (no endpoint at all) */
  outcome: 'ok' | 'saturated' | 'unavailable';
  endpoint?: string;
  /** why the endpoint was chosen over the policy: the answer the request continues is stored there */
  pinned_by?: 'previous_response_id' | 'response_id';
  /** 1 for the first try, 2… for retries on another endpoint */
  attempt: number;
  explain?: PickExplain;
}

export class DecisionRing {
  private readonly slots: Array<Decision | undefined>;
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    this.slots = new Array<Decision | undefined>(Math.max(0, capacity));
  }

  push(d: Decision): void {
    if (this.capacity === 0) return;
    this.slots[this.next] = d;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  get size(): number {
    return this.count;
  }

  /** The newest `n` decisions, newest first. */
  last(n: number): Decision[] {
    const k = Math.min(Math.max(0, Math.floor(n)), this.count);
    const out: Decision[] = [];
    for (let i = 1; i <= k; i++) out.push(this.slots[(this.next - i + this.capacity) % this.capacity]!);
    return out;
  }
}

/** A decision as /debug/decisions shows it: time as ISO text, each candidate with its scores. */
export function decisionJson(d: Decision): Record<string, unknown> {
  const e = d.explain;
  return {
    time: new Date(d.at).toISOString(),
    req_id: d.req_id,
    pool: d.pool,
    model: d.model,
    attempt: d.attempt,
    outcome: d.outcome,
    endpoint: d.endpoint ?? null,
    ...(d.pinned_by !== undefined && { pinned_by: d.pinned_by }),
    policy: e?.policy ?? null,
    prompt_blocks: e?.totalBlocks ?? 0,
    candidates: (e?.candidates ?? []).map((c) => ({
      endpoint: c.endpoint,
      scores: c.scores,
      weighted: c.weighted,
      cost_tokens: c.cost,
      load_factor: c.loadFactor,
      total: c.total,
      matched_blocks: c.matchedBlocks,
      stale: c.stale,
    })),
    filtered: e?.filtered ?? [],
  };
}
