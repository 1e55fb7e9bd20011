/**
 * lora (adapter requests only): the adapter resident 1, a free adapter slot 0.8, the adapter waiting for a
 * slot 0.6, every slot taken by others 0; 0.5 without signals.
 */
import type { Scorer } from './scorer.js';

export const loraScorer: Scorer<'lora'> = {
  name: 'lora',
  defaultWeight: 1,
  appliesTo: (t) => t.adapter !== null,
  score(t, out) {
    const adapter = t.adapter;
    const cands = t.cands;
    for (let i = 0; i < cands.length; i++) {
      const s = cands[i].st.sig;
      if (adapter === null) out[i] = 0;
      else if (!s) out[i] = 0.5; // unknown
      else if (s.loraRunning.includes(adapter)) out[i] = 1;
      else if (s.maxLoras <= 0 || s.loraRunning.length < s.maxLoras) out[i] = 0.8;
      else if (s.loraWaiting.includes(adapter)) out[i] = 0.6;
      else out[i] = 0;
    }
  },
};
