/**
 * The mock's store of Responses API answers, as vLLM keeps them with `VLLM_ENABLE_RESPONSES_API_STORE=1`:
 * in the memory of the server that made them, so that a request with `previous_response_id` continues the
 * conversation only on that server (any other answers 404). vLLM's store never forgets; the mock's is an
 * LRU bounded by entries (`--response-store N`; 0: nothing is stored, as vLLM without that variable).
 */
import { LRUCache } from 'lru-cache';

/**
 * A stored answer: what a follow-up needs (the conversation it answered, and its output text) and what a
 * retrieve or cancel answers (the response object, its stream of events).
 */
export interface StoredResponse {
  /** the prompt's messages (instructions as a system message first, then the history and the input) */
  readonly messages: readonly unknown[];
  /** the assistant message's text */
  readonly output: string;
  /** the response object as GET /v1/responses/{id} answers it: its `status` changes (background, cancel) */
  response: Record<string, unknown>;
  /** its events as a stream carries them (`event:` and `data:` lines), for a retrieve with `?stream=true` */
  readonly events: ReadonlyArray<{ readonly sequence: number; readonly text: string }>;
  /** a background answer still running: the response it becomes when it completes */
  pending?: Record<string, unknown>;
}

/** The mock's default bound on stored responses, per server. */
export const DEFAULT_RESPONSE_STORE_ENTRIES = 1024;

export class ResponseStore {
  private readonly cache: LRUCache<string, StoredResponse> | null;

  constructor(readonly maxEntries: number = DEFAULT_RESPONSE_STORE_ENTRIES) {
    this.cache = maxEntries > 0 ? new LRUCache<string, StoredResponse>({ max: maxEntries }) : null;
  }

  /** Whether answers are stored at all (with the store off, `store: true` is ignored, as vLLM does). */
  get enabled(): boolean {
    return this.cache !== null;
  }

  get size(): number {
    return this.cache?.size ?? 0;
  }

  get(id: string): StoredResponse | undefined {
    return this.cache?.get(id);
  }

  set(id: string, r: StoredResponse): void {
    this.cache?.set(id, r);
  }

  /** A background answer's generation is over: it becomes its completed response (unless cancelled meanwhile). */
  complete(id: string): void {
    const r = this.cache?.peek(id);
    if (r?.pending === undefined) return;
    r.response = r.pending;
    r.pending = undefined;
  }
}
