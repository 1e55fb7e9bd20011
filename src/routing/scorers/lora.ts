/**
 * lora (adapter requests only): the adapter resident 1, a free adapter slot 0.8, the adapter waiting for a
 * slot 0.6, every slot taken by others 0; 0.5 without signals.
 */
import type { EndpointSignals } from '../types.js';
import type { Scorer } from './scorer.js';

export const loraScorer: Scorer<'lora'> = {
  name: 'lora',
  defaultWeight: 1,
  appliesTo: (t) => t.adapter !== null,
  score(t, w, sum) {
    const n = t.n;
    const adapter = t.adapter;
    if (adapter === null) return; // every score 0: adds nothing (and the scorer does not apply)
    for (let i = 0; i < n; i++) sum[i] += w * slotScore(t.st[i].sig, adapter);
  },
};

function slotScore(s: EndpointSignals | null, adapter: string): number {
  if (!s) return 0.5; // unknown
  if (s.loraRunning.includes(adapter)) return 1;
  if (s.maxLoras <= 0 || s.loraRunning.length < s.maxLoras) return 0.8;
  if (s.loraWaiting.includes(adapter)) return 0.6;
  return 0;
}
