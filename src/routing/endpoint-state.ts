/**
 * One endpoint as a pool sees it (its last signals and the gateway's own accounting of what it sent
 * there), the tickets of dispatched requests, and the accounting at dispatch, first byte and end,
 * including passive ejection after consecutive errors (whether the pool allows one more ejection is the
 * pool's call: see PoolRouter.onEnd). Pure: `now` comes from the caller.
 */
import type { Tuning } from './tuning.js';
import type { EndpointSignals, Outcome, Ticket } from './types.js';

export class EndpointState {
  sig: EndpointSignals | null = null;
  sigAt = -Infinity;
  scrapeFailures = 0;
  lastFailAt = -Infinity;
  /** bumps on every updateSignals; tickets dispatched in the current epoch are not in the metrics yet */
  epoch = 0;
  inFlight = 0;
  /**
   * requests other gateway replicas have in flight here, as last heard (PoolRouter.setRemoteInFlight; only
   * the simulator's `--share events+inflight` sets it, else 0): the load scorer counts them with ours
   */
  remoteInFlight = 0;
  /** dispatched, no first byte yet */
  pending = 0;
  /** uncached prompt tokens of the pending requests */
  pendingTokens = 0;
  decoding = 0;
  /** pending requests dispatched since the last scrape */
  sinceScrape = 0;
  /** requests dispatched since the last scrape that have not ended (pending or decoding: each holds a seat) */
  liveSinceScrape = 0;
  /** our pending requests when the last scrape was taken (it could see them, waiting or running) */
  pendingAtScrape = 0;
  /** batch capacity (max_num_seqs) when the signals carry it; Infinity otherwise */
  capacity = Infinity;
  /** whole-decode time of our requests here (first byte → end, EWMA, ms); 0 = none ended yet */
  decodeMs = 0;
  /** our decoding LoRA-adapter tickets (their adapter and first-byte time: how long a slot stays taken) */
  adapterTickets: PoolTicket[] = [];
  consecutiveErrors = 0;
  /** ejections in a row (reset by a success after the last one ended): sets the next one's length */
  ejections = 0;
  ejectedUntil = -Infinity;
  /** every ejection since the endpoint joined the pool (the counter /debug/pools shows) */
  ejectionsTotal = 0;
  /** ejections the pool's max_ejection_percent held back */
  ejectionsHeldBack = 0;
  lastFirstByteAt = -Infinity;
  /** since when the endpoint has worked on its current head pending request (pending > 0) */
  busySince = 0;
  /** observed prefill speed: EWMA sums of uncached tokens and the time they took at the head (ms) */
  prefillTok = 0;
  prefillMs = 0;
  /** first bytes per second (EWMA): how fast this endpoint drains its queue */
  drainRate = 0;
  /** time to first byte of our requests here (dispatch → first byte, EWMA, ms); 0 = none yet */
  ttftMs = 0;
  /**
   * our dispatched tickets in dispatch order (so by `at`), from `pendingHead` on; those no longer pending
   * are dropped lazily (see overdue() in saturation.ts)
   */
  pendingQ: PoolTicket[] = [];
  pendingHead = 0;
  removed = false;
  constructor(
    readonly id: number,
    readonly name: string,
  ) {}
}

/** Who a live ticket goes back to (its pool); the Router forwards learn/onFirstByte/onEnd there. */
export interface TicketOwner {
  learn(t: Ticket): void;
  onFirstByte(t: Ticket, now: number): void;
  onEnd(t: Ticket, now: number, outcome: Outcome): void;
}

export const PENDING = 0;
export const DECODING = 1;
export const ENDED = 2;

export class PoolTicket implements Ticket {
  phase = PENDING;
  firstByteAt = 0;
  /**
   * when the picker could tell (a prefill speed observed on the endpoint): the time its first byte was
   * expected to take at pick, the prefill work ahead of it and its own uncached prompt at that speed (ms);
   * 0 otherwise. Saturation's overdue rule gives the request this much on top (saturation.ts `overdue`)
   */
  expectMs = 0;
  /** the LoRA adapter requested, or null for a base-model request */
  adapter: string | null = null;
  constructor(
    readonly endpoint: string,
    readonly pool: string,
    readonly st: EndpointState,
    /** uncached prompt tokens at pick time */
    readonly tokens: number,
    readonly epoch: number,
    readonly at: number,
    /** null for a dry run's ticket, which the accounting ignores */
    readonly owner: TicketOwner | null,
  ) {}
}

/** A request sent to the ticket's endpoint: it is pending there until its first byte. */
export function dispatched(tk: PoolTicket, now: number): void {
  const st = tk.st;
  tk.phase = PENDING;
  st.inFlight++;
  if (st.pending++ === 0) st.busySince = now;
  st.pendingTokens += tk.tokens;
  st.sinceScrape++;
  st.liveSinceScrape++;
  const q = st.pendingQ;
  // keep the queue short: drop what is no longer pending once it outnumbers the pending ones
  if (q.length - st.pendingHead > 2 * st.pending + 64) {
    let w = 0;
    for (let i = st.pendingHead; i < q.length; i++) if (q[i].phase === PENDING) q[w++] = q[i];
    q.length = w;
    st.pendingHead = 0;
  }
  q.push(tk);
}

export function firstByte(t: Ticket, now: number): void {
  const tk = t as PoolTicket;
  if (!(tk instanceof PoolTicket) || tk.phase !== PENDING) return;
  const st = tk.st;
  // prefill speed: this request was at the head since the later of its dispatch and the previous first byte
  const headMs = now - Math.max(st.busySince, tk.at);
  if (headMs > 0) {
    st.prefillTok = 0.9 * st.prefillTok + tk.tokens;
    st.prefillMs = 0.9 * st.prefillMs + headMs;
  }
  st.busySince = now;
  const ttft = Math.max(0, now - tk.at);
  st.ttftMs = st.ttftMs > 0 ? 0.8 * st.ttftMs + 0.2 * ttft : Math.max(1, ttft);
  st.pending--;
  st.pendingTokens -= tk.tokens;
  if (st.pendingTokens < 1e-6) st.pendingTokens = Math.max(0, st.pendingTokens);
  if (tk.epoch === st.epoch && st.sinceScrape > 0) st.sinceScrape--;
  st.decoding++;
  tk.phase = DECODING;
  tk.firstByteAt = now;
  if (tk.adapter !== null) st.adapterTickets.push(tk);
  if (st.lastFirstByteAt > -Infinity) {
    const dt = Math.max(1, now - st.lastFirstByteAt);
    const inst = 1000 / dt;
    st.drainRate = st.drainRate > 0 ? 0.8 * st.drainRate + 0.2 * inst : inst;
  }
  st.lastFirstByteAt = now;
}

/**
 * The request of ticket `t` ended. Returns true when its outcome was the endpoint's
 * `ejectAfterErrors`-th consecutive error: the pool then ejects it (eject()) if its ceiling allows. Only
 * 'error' counts against an endpoint ('aborted' is the gateway's or the client's doing).
 */
export function ended(t: Ticket, now: number, outcome: Outcome, tuning: Tuning): boolean {
  const tk = t as PoolTicket;
  if (!(tk instanceof PoolTicket) || tk.phase === ENDED) return false;
  const st = tk.st;
  if (tk.phase === PENDING) {
    st.pending--;
    st.pendingTokens = Math.max(0, st.pendingTokens - tk.tokens);
    if (tk.epoch === st.epoch && st.sinceScrape > 0) st.sinceScrape--;
  } else {
    st.decoding--;
    if (outcome === 'ok') {
      const d = Math.max(0, now - tk.firstByteAt);
      st.decodeMs = st.decodeMs > 0 ? 0.8 * st.decodeMs + 0.2 * d : d;
    }
    if (tk.adapter !== null) {
      const i = st.adapterTickets.indexOf(tk);
      if (i >= 0) {
        st.adapterTickets[i] = st.adapterTickets[st.adapterTickets.length - 1];
        st.adapterTickets.pop();
      }
    }
  }
  st.inFlight--;
  if (tk.epoch === st.epoch && st.liveSinceScrape > 0) st.liveSinceScrape--;
  tk.phase = ENDED;
  if (outcome === 'error') {
    // an endpoint ejected already (a request sent before its ejection failing late) is not ejected again
    if (st.ejectedUntil > now) return false;
    // held at the threshold while the ceiling holds it back: its next error asks again
    st.consecutiveErrors = Math.min(st.consecutiveErrors + 1, tuning.ejectAfterErrors);
    return st.consecutiveErrors >= tuning.ejectAfterErrors;
  }
  if (outcome === 'ok') {
    st.consecutiveErrors = 0;
    if (st.ejectedUntil <= now) st.ejections = 0;
  }
  return false;
}

/** Ejects `st` from picks for a while: `ejectBaseMs`, doubling per ejection in a row, up to `ejectMaxMs`. */
export function eject(st: EndpointState, now: number, tuning: Tuning): void {
  const ms = Math.min(tuning.ejectMaxMs, tuning.ejectBaseMs * 2 ** st.ejections);
  st.ejections++;
  st.ejectionsTotal++;
  st.ejectedUntil = now + ms;
  st.consecutiveErrors = 0;
}

/**
 * How many of a pool's `endpoints` may be ejected at once: `percent` of them rounded down, but at least
 * one (a pool of two at 10% could otherwise never eject its broken half); 0% turns ejection off.
 */
export function ejectionCeiling(endpoints: number, percent: number): number {
  if (percent <= 0 || endpoints <= 0) return 0;
  return Math.max(1, Math.floor((endpoints * percent) / 100 + 1e-9));
}
