/**
 * Saturation (every policy): an endpoint is saturated when the evidence says requests wait there —
 * `queued(…)` at or over queue_depth — or its fresh KV-cache use reaches kv_cache; it is over the backlog
 * bound when the prefill work ahead of a new request there would take longer than max_prefill_backlog (0
 * turns any of the tests off). With every candidate saturated or over the bound the pick answers
 * "saturated" with a Retry-After. A saturated endpoint is no candidate; one only over the bound stays one
 * while another is under it (its cost carries the backlog, weighed against what its cached prefix saves).
 *
 * The prefill backlog is for engines with many seats (vLLM's default 256): such an engine admits nearly every
 * request into its running batch, where the prompts are prefilled first come first served in chunked steps,
 * so its `waiting` count stays near 0 and its KV cache below the threshold while the time to a first token
 * grows to tens of seconds. The work ahead is the candidate table's estimate (candidates.ts
 * `prefillAheadTokens`: our pending requests' uncached tokens less the progress seen, plus an assumed prompt
 * per waiting request the scrape showed that is not ours), in time at the speed observed on that endpoint
 * (uncached tokens per ms of head-of-queue time between first bytes). Before a speed has been observed there
 * the test does not apply: a burst into an idle pod is bounded by its seats and the overdue rule below, not
 * by a guess of how fast it prefills.
 *
 * The bound weighs the request too (`overBacklogBound`): its own prefill, counted up to
 * `Tuning.ownPrefillShare` (0.5) of the bound, is added to the work ahead. So under load a 30k-token prompt
 * is over the bound once half of it is queued ahead, a 1k-token one only near the whole bound: when the pool
 * must shed, it sheds the requests whose prefill would cost the most, and takes many short ones for each long
 * one it refuses (the issue's "shed the requests whose prefill would be longest"). Capped below the whole
 * bound, so an endpoint with nothing queued still takes any prompt.
 *
 * What counts as waiting is evidence, never the mere count of our requests in flight: a burst into idle
 * pods is what a batching engine schedules in one step (20 streams onto 2 idle vLLM pods all run at once),
 * so requests sent since the last scrape count only
 * - beyond the free seats of the batch capacity (max_num_seqs, configured or reported; else vLLM's
 *   default of 256, `assumedBatchCapacity`, so that a flood between two scrapes is not admitted whole), or
 * - once they have waited for a first byte longer than `overdueTtftFactor` × the endpoint's recent time to
 *   first token (the assumed `ttftMs` until one is measured; at least `overdueMinMs`): a request that late
 *   is queued somewhere.
 * The scraped queue counts as it is. Without fresh metrics the same two tests apply to all our pending
 * requests (in flight beyond the capacity; pending past the TTFT).
 *
 * The KV test weighs the request too (`kvTakesCached`): an endpoint over the threshold stays a candidate for
 * a request whose prompt it mostly holds (`Tuning.kvHeldShare`, half) while its free KV holds what is queued
 * and the prompt's uncached part. The threshold keeps cold prompts from evicting the cache and crowding the
 * batch; a request that hits the cache there needs few blocks, and sent elsewhere it would be prefilled
 * whole (on rag traffic under overload the threshold on its own refused 16–20% of the requests, most of
 * them cached on an endpoint just over 0.8).
 *
 * Once the backlog bound can judge an endpoint (it is on and a prefill speed has been observed there,
 * `backlogJudges`), the queue test leaves it the queues that form for prefill and counts only what the
 * backlog cannot see. A scraped queue beside free seats waits for the step's token budget, taken by the
 * prefills ahead: that is the backlog's measure, which weighs each request by its uncached work, where a
 * count does not (a burst of requests on one cached 16k-token prefix showed a queue of five on every
 * endpoint for the second the first prefill took, and was refused). So the count there is
 * - the requests beyond the batch's seats: the scraped running and waiting plus ours sent since, less the
 *   capacity (a small batch, `max_num_seqs` 16, fills its seats while its prefill backlog stays short: these
 *   wait for sequences to end, which no prefill figure shows), or
 * - those of ours late for their first byte by more than the overdue time above *plus* the prefill they
 *   were expected to wait for at pick (the ticket's `expectMs`): still evidence of an endpoint that stalls,
 *   no longer of one that is merely working through what the picker sent it,
 * whichever is more.
 */
import type { CandidateTable } from './candidates.js';
import { PENDING, type EndpointState } from './endpoint-state.js';
import type { SaturationOptions } from './options.js';
import type { Tuning } from './tuning.js';

export function isSaturated(waiting: number, fresh: boolean, kv: number, queueDepth: number, kvCache: number): boolean {
  return (queueDepth > 0 && waiting >= queueDepth) || (kvCache > 0 && fresh && kv >= kvCache);
}

/**
 * `prefillTokens` of work ahead on `st` in ms at its observed prefill speed; 0 while none is observed (the
 * backlog test then does not apply).
 */
export function prefillBacklogMs(st: EndpointState, prefillTokens: number): number {
  return st.prefillMs > 0 && st.prefillTok > 0 && prefillTokens > 0 ? (prefillTokens * st.prefillMs) / st.prefillTok : 0;
}

/**
 * Whether a request whose uncached prompt is `uncachedTokens` is over the prefill-backlog bound on `st`: the
 * work ahead (`backlogMs`) plus its own prefill, counted up to `ownShare` × the bound, exceeds the bound.
 * Never with the bound off (0) or, for the own part, before a prefill speed has been observed there.
 */
export function overBacklogBound(st: EndpointState, backlogMs: number, uncachedTokens: number, maxBacklog: number, ownShare: number): boolean {
  if (!(maxBacklog > 0)) return false;
  if (backlogMs > maxBacklog) return true;
  if (!(ownShare > 0)) return false;
  const own = prefillBacklogMs(st, uncachedTokens);
  return backlogMs + Math.min(own, ownShare * maxBacklog) > maxBacklog;
}

/**
 * Whether `st`, over the KV-cache threshold, still takes a request: its cache holds at least `share` of the
 * prompt (`promptTokens`, of which `uncachedTokens` are not there), so the request needs blocks for its
 * uncached part only and evicts little, and its free KV (from the scrape: 1 − use, × blocks × block size)
 * holds that part and the prefill queued ahead (`aheadTokens`). Without the cache's size in the signals: no.
 */
export function kvTakesCached(st: EndpointState, promptTokens: number, uncachedTokens: number, aheadTokens: number, share: number): boolean {
  const s = st.sig;
  if (s === null || !s.numGpuBlocks || !s.blockSize || !(promptTokens > 0)) return false;
  if (promptTokens - uncachedTokens < share * promptTokens) return false;
  return aheadTokens + uncachedTokens <= (1 - s.kvUsage) * s.numGpuBlocks * s.blockSize;
}

/** Most overdue requests counted per endpoint (the count only feeds a threshold and Retry-After). */
const OVERDUE_LIMIT = 4096;

/**
 * Whether the prefill-backlog bound judges `st`'s queue: the bound is on (`maxBacklog` > 0) and a prefill
 * speed has been observed there, so the work ahead has a figure in time. A queue that forms for prefill is
 * then the bound's to weigh (a queue of requests whose prompts are cached is little work), and the queue
 * test counts only what the backlog cannot see: requests beyond the batch's seats, and requests late by
 * more than their own expected prefill.
 */
export function backlogJudges(st: EndpointState, maxBacklog: number): boolean {
  return maxBacklog > 0 && st.prefillMs > 0 && st.prefillTok > 0;
}

/**
 * Requests waiting on an endpoint, on evidence. Where the backlog bound judges the endpoint
 * (`backlogJudges`): those beyond the batch's seats (the scraped running and waiting plus ours sent since,
 * less the capacity), or those of ours late for their first byte beyond their expected prefill, whichever is
 * more. Otherwise (bound off, or no speed observed yet): the scraped queue (fresh metrics), plus those of our
 * requests the scrape could not see that are beyond the free batch seats or overdue, whichever is more.
 */
export function queued(st: EndpointState, fresh: boolean, now: number, t: Tuning, maxBacklog: number): number {
  const cap = st.capacity !== Infinity ? st.capacity : t.assumedBatchCapacity > 0 ? t.assumedBatchCapacity : Infinity;
  const judged = backlogJudges(st, maxBacklog);
  if (fresh) {
    const s = st.sig!;
    if (judged) {
      const seats = cap === Infinity ? 0 : Math.max(0, s.running + s.waiting + st.liveSinceScrape - cap);
      return Math.max(seats, overdue(st, now, t, false, true));
    }
    // seats the scrape showed free; our requests sent since (running or not) take them first
    const free = cap === Infinity ? Infinity : Math.max(0, cap - s.running - s.waiting);
    const beyond = st.liveSinceScrape > free ? st.liveSinceScrape - free : 0;
    return s.waiting + Math.max(beyond, overdue(st, now, t, true, false));
  }
  const beyond = cap !== Infinity && st.inFlight > cap ? st.inFlight - cap : 0;
  return Math.max(beyond, overdue(st, now, t, false, judged));
}

/**
 * Our requests (with `sinceScrape`: only those dispatched since the last scrape) still without a first
 * byte after more than the endpoint's recent TTFT × overdueTtftFactor (at least overdueMinMs), and with
 * `ownPrefill` also more than the time their first byte was expected to take at pick (the ticket's
 * `expectMs`: a request behind a long prefill the picker knew of is not late for waiting its turn). Walks the
 * dispatch-ordered queue from its oldest entry, dropping the head entries that are no longer pending, and
 * stops at the first one not yet overdue.
 */
export function overdue(st: EndpointState, now: number, t: Tuning, sinceScrape: boolean, ownPrefill = false): number {
  if (st.pending === 0) return 0;
  const q = st.pendingQ;
  let h = st.pendingHead;
  while (h < q.length && q[h].phase !== PENDING) h++;
  if (h === q.length) {
    q.length = 0;
    h = 0;
  } else if (h > 1024 && h * 2 > q.length) {
    q.splice(0, h);
    h = 0;
  }
  st.pendingHead = h;
  const limit = now - Math.max(t.overdueMinMs, t.overdueTtftFactor * (st.ttftMs > 0 ? st.ttftMs : t.ttftMs));
  let n = 0;
  for (let i = h; i < q.length && n < OVERDUE_LIMIT; i++) {
    const tk = q[i];
    if (tk.at + (ownPrefill ? tk.expectMs : 0) >= limit) break;
    if (tk.phase === PENDING && (!sinceScrape || tk.epoch === st.epoch)) n++;
  }
  return n;
}

/** Seconds until the least-saturated endpoint has likely drained below the thresholds (1..60). */
export function retryAfterS(t: CandidateTable, sat: SaturationOptions): number {
  const ra = sat.retry_after;
  if (ra !== 'auto') return Math.max(1, Math.ceil(ra / 1000));
  const qd = sat.queue_depth;
  const maxBacklog = sat.max_prefill_backlog;
  let best = Infinity;
  for (let i = 0; i < t.n; i++) {
    const excess = qd > 0 ? Math.max(0, t.queued[i] - qd + 1) : 0;
    // no drain measurement yet: assume one request per second
    const drainRate = t.st[i].drainRate;
    const rate = drainRate > 0 ? drainRate : 1;
    // the backlog drains at the observed prefill speed, in which backlogMs is measured
    const overBacklog = maxBacklog > 0 ? (t.backlogMs[i] - maxBacklog) / 1000 : 0;
    let s = excess > 0 ? excess / rate : 0;
    if (overBacklog > s) s = overBacklog;
    if (s <= 0) s = 1; // kv-saturated only: a second, then look again
    if (s < best) best = s;
  }
  if (!Number.isFinite(best)) best = 1;
  return Math.max(1, Math.min(60, Math.ceil(best)));
}
