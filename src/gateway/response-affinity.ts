/**
 * Responses API conversations (`response_affinity`): vLLM keeps a stored answer in the memory of the server
 * that made it, so a follow-up naming it in `previous_response_id`, and a retrieve or cancel of it
 * (`GET /v1/responses/{id}`, `POST /v1/responses/{id}/cancel`), must reach that server; any other answers
 * 404. The gateway learns each relayed answer's id with the endpoint that served it (ResponseIdWatch reads
 * the id from what the answer's usage reader keeps or frames: no byte is held back) in a bounded LRU with
 * a TTL. A follow-up whose id it knows is picked with that endpoint preferred (PickInput.prefer); an id it
 * never saw, or one whose endpoint is gone, is routed as any request (the server answers its not-found).
 * A retrieve or cancel goes to the remembered endpoint only; an id the gateway does not know is answered
 * 404 by the gateway itself. Replicas (cluster.backend: redis) and the workers of `--workers` share what
 * they remember (src/cluster/: each answer's id, pool, endpoint, models and tenant, batched per event-loop
 * turn), so a retrieve or follow-up reaching another replica finds the server that keeps the answer once
 * that batch has arrived (the next turn over IPC, a Redis round trip between replicas).
 */
import { LRUCache } from 'lru-cache';
import { errors, type ApiError } from '../openai/errors.js';
import { topLevelSpan, type AnswerHooks } from '../openai/usage.js';

/** The longest `previous_response_id` accepted (vLLM's are `resp_` + 32 hex digits; OpenAI's are shorter). */
export const MAX_RESPONSE_ID_CHARS = 256;

export interface ResponseAffinityConfig {
  max_entries: number;
  /** ms */
  ttl: number;
}

/** What is remembered of a relayed answer. */
export interface Served {
  readonly pool: string;
  readonly endpoint: string;
  /** the model as the client named it, and as it was sent upstream (an alias resolved) */
  readonly model: string;
  readonly target: string;
  /** the tenant whose request made it ('' with auth off): only it may retrieve or cancel the answer */
  readonly tenant: string;
}

export class ResponseAffinity {
  private cache: LRUCache<string, Served> | null = null;
  private cfg: ResponseAffinityConfig = { max_entries: 0, ttl: 0 };

  constructor(cfg: ResponseAffinityConfig) {
    this.configure(cfg);
  }

  /** A new bound or TTL (a reload): what is remembered is kept, as far as the new bound allows. */
  configure(cfg: ResponseAffinityConfig): void {
    if (cfg.max_entries === this.cfg.max_entries && cfg.ttl === this.cfg.ttl) return;
    const old = this.cache;
    this.cfg = { max_entries: cfg.max_entries, ttl: cfg.ttl };
    this.cache = cfg.max_entries > 0 ? new LRUCache<string, Served>({ max: cfg.max_entries, ttl: cfg.ttl, ttlAutopurge: false }) : null;
    if (old && this.cache) this.cache.load(old.dump());
  }

  get enabled(): boolean {
    return this.cache !== null;
  }

  get size(): number {
    return this.cache?.size ?? 0;
  }

  /**
   * Told of each answer this process remembers (the cluster share sends it to the replicas or sibling
   * workers: src/cluster/); never of one learned from them.
   */
  onRemember: ((id: string, served: Served) => void) | undefined;

  /** An answer with this id was served as `served` says. */
  remember(id: string, served: Served): void {
    if (this.cache === null) return;
    this.cache.set(id, served);
    this.onRemember?.(id, served);
  }

  /**
   * An answer another replica or worker served (from the cluster share): remembered as if relayed here, not
   * passed on. A pool or endpoint this gateway does not have is kept too: a retrieve of it answers 502, as
   * one whose server left the pool. Throws on what is not a response id (the share counts it invalid).
   */
  rememberRemote(id: string, served: Served): void {
    const problem = idProblem(id);
    if (problem !== null) throw new Error(`a stored answer's id ${problem}`);
    if (this.cache === null) return;
    this.cache.set(id, { pool: served.pool, endpoint: served.endpoint, model: served.model, target: served.target, tenant: served.tenant });
  }

  /** What is remembered of the answer `id`, if anything (a follow-up, a retrieve or a cancel of it). */
  lookup(id: string): Served | undefined {
    return this.cache?.get(id);
  }
}

/** Why `v` is not a response id (a string of 1 to MAX_RESPONSE_ID_CHARS printable ASCII characters), or null. */
function idProblem(v: string): string | null {
  if (v.length === 0 || v.length > MAX_RESPONSE_ID_CHARS) return `must be 1 to ${MAX_RESPONSE_ID_CHARS} characters long`;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return 'may hold printable ASCII characters only';
  }
  return null;
}

/**
 * A request's `previous_response_id`: undefined when absent or null, the error to answer when it is not an
 * id (not a string, empty, longer than MAX_RESPONSE_ID_CHARS, or holding anything but printable ASCII:
 * no server makes such ids, and bytes that were not UTF-8 arrive here as U+FFFD).
 */
export function previousResponseId(body: Record<string, unknown>): string | undefined | ApiError {
  const v = body.previous_response_id;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') return errors.invalidField('previous_response_id', 'The "previous_response_id" field must be a string.');
  const problem = idProblem(v);
  return problem === null ? v : errors.invalidField('previous_response_id', `The "previous_response_id" field ${problem}.`);
}

/** The calls on a stored answer: retrieve (`GET /v1/responses/{id}`) and cancel (`POST /v1/responses/{id}/cancel`). */
export type StoredOp = 'retrieve' | 'cancel';

const RESPONSES_PREFIX = '/v1/responses/';
const CANCEL_SUFFIX = '/cancel';

/**
 * The response id in the path of a retrieve or cancel (percent-decoded, as vLLM's server decodes it),
 * checked as `previous_response_id` is; the error to answer (400, `param: response_id`) when it is not one.
 */
export function storedResponseId(path: string, op: StoredOp): string | ApiError {
  let raw = path.startsWith(RESPONSES_PREFIX) ? path.slice(RESPONSES_PREFIX.length) : '';
  if (op === 'cancel') raw = raw.endsWith(CANCEL_SUFFIX) ? raw.slice(0, -CANCEL_SUFFIX.length) : '';
  let id = raw;
  if (raw.includes('%')) {
    try {
      id = decodeURIComponent(raw); // throws on a bad escape or bytes that are not UTF-8
    } catch {
      return errors.invalidField('response_id', 'The response id in the path is not valid percent-encoded UTF-8.');
    }
  }
  const problem = id.includes('/') ? 'may not hold "/"' : idProblem(id);
  return problem === null ? id : errors.invalidField('response_id', `The response id in the path ${problem}.`);
}

/**
 * The query string of a retrieve, passed on as it came (vLLM reads `stream` and `starting_after`), or the
 * 400 to answer when it holds what a request line may not carry on (checked here: undici would refuse it).
 */
export function storedQueryProblem(query: string): ApiError | undefined {
  for (let i = 0; i < query.length; i++) {
    const c = query.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x23) return errors.invalidField('query', 'The query string may hold printable ASCII characters only (no "#").');
  }
  return undefined;
}

/** Whether a retrieve asks for the stored answer as a stream of events (`?stream=true`, as FastAPI reads a bool). */
export function wantsStream(query: string): boolean {
  if (query === '') return false;
  const v = new URLSearchParams(query).get('stream');
  return v !== null && /^(true|1|yes|on)$/i.test(v);
}

/** How much of a stream is looked at for the id (it is in the first event, `response.created`). */
const MAX_WATCHED_BYTES = 1 << 20;

/**
 * Reads a Responses API answer's id through the hooks of the answer's usage reader (AnswerUsage in
 * openai/usage.ts), which already keeps a JSON answer (up to 1 MiB) and frames a stream's events: a JSON
 * answer's top-level `id`, or the `response.id` of a stream's first event that has one
 * (`response.created`). An id that is not one a request could name (see previousResponseId) is not taken.
 * A non-streamed answer over the kept size is not read (its follow-ups are routed as unknown ids).
 */
export class ResponseIdWatch implements AnswerHooks {
  /** the id, once read */
  id: string | undefined;
  private watched = 0;

  event(data: unknown, bytes: number): boolean {
    this.watched += bytes;
    const r = data !== null && typeof data === 'object' ? (data as { response?: unknown }).response : undefined;
    const id = r !== null && typeof r === 'object' ? (r as { id?: unknown }).id : undefined;
    if (typeof id === 'string' && idProblem(id) === null) this.id = id;
    return this.id !== undefined || this.watched > MAX_WATCHED_BYTES;
  }

  whole(answer: Buffer): void {
    const where = topLevelSpan(answer, 'id');
    if (where?.span == null) return;
    const [start, end] = where.span;
    if (answer[start] !== 0x22) return; // not a string
    try {
      const id: unknown = JSON.parse(answer.toString('utf8', start, end));
      if (typeof id === 'string' && idProblem(id) === null) this.id = id;
    } catch {
      // not JSON after all: no id
    }
  }
}
