/**
 * Responses API conversations (`response_affinity`): vLLM keeps a stored answer in the memory of the server
 * that made it, so a follow-up naming it in `previous_response_id` must reach that server; any other answers
 * 404. The gateway learns each relayed answer's id with the endpoint that served it (ResponseIdReader reads
 * the id as the answer passes: no byte is held back) in a bounded LRU with a TTL, and a follow-up whose id
 * it knows is picked with that endpoint preferred (PickInput.prefer). An id it never saw, or one whose
 * endpoint is gone, is routed as any request (the server answers its not-found). The map is this
 * process's own: replicas (cluster.backend: redis) and `--workers` do not share it.
 */
import { LRUCache } from 'lru-cache';
import { errors, type ApiError } from '../openai/errors.js';

/** The longest `previous_response_id` accepted (vLLM's are `resp_` + 32 hex digits; OpenAI's are shorter). */
export const MAX_RESPONSE_ID_CHARS = 256;

export interface ResponseAffinityConfig {
  max_entries: number;
  /** ms */
  ttl: number;
}

interface Served {
  readonly pool: string;
  readonly endpoint: string;
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

  /** An answer with this id was served by `endpoint` of `pool`. */
  remember(id: string, pool: string, endpoint: string): void {
    this.cache?.set(id, { pool, endpoint });
  }

  /** The endpoint of `pool` that served the answer `id`, if remembered (an id served in another pool: none). */
  endpointFor(id: string, pool: string): string | undefined {
    const s = this.cache?.get(id);
    return s !== undefined && s.pool === pool ? s.endpoint : undefined;
  }
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
  if (v.length === 0 || v.length > MAX_RESPONSE_ID_CHARS) {
    return errors.invalidField('previous_response_id', `The "previous_response_id" field must be 1 to ${MAX_RESPONSE_ID_CHARS} characters long.`);
  }
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return errors.invalidField('previous_response_id', 'The "previous_response_id" field may hold printable ASCII characters only.');
  }
  return v;
}

/** How far into an answer the id is looked for (it comes first in vLLM's and OpenAI's answers). */
const MAX_SCAN_BYTES = 1 << 20;
/** The deepest nesting followed (the id is at depth 1 or 2). */
const MAX_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Path of the id in a JSON answer (`{"id": …}`) and in a stream's events (`{"response": {"id": …}}`). */
const JSON_PATH = ['id'];
const SSE_PATH = ['response', 'id'];

/**
 * The id of a Responses API answer, read from its bytes as they pass (chunks split anywhere): a JSON
 * answer's top-level `id`, or in a stream the first event whose `response` object has one
 * (`response.created`). A state machine over the bytes that keeps no chunk: only the few bytes of a key
 * on the id's path and of the id itself. Outside a JSON object (SSE's `event:`/`data:` lines) only `{`
 * counts. It stops at the id, or after MAX_SCAN_BYTES; an id with escapes or non-ASCII bytes is not taken.
 */
export class ResponseIdReader {
  /** the id, once read */
  id: string | undefined;
  private readonly path: readonly string[];
  private done = false;
  private scanned = 0;
  private depth = 0;
  /** per depth (1-based): 1 object on the id's path, 0 any other object, 2 an array */
  private readonly kinds: number[] = [0];
  private inString = false;
  private escaped = false;
  /** the string being read is captured: 1 a key on the path, 2 the id */
  private capture = 0;
  private captured = '';
  private captureBad = false;
  /** in an object: the next string is a key */
  private expectKey = false;
  /** the last key read matched the path at this depth */
  private keyMatched = false;

  constructor(sse: boolean) {
    this.path = sse ? SSE_PATH : JSON_PATH;
  }

  push(chunk: Buffer): void {
    if (this.done) return;
    const n = chunk.length;
    for (let i = 0; i < n && !this.done; i++) {
      const b = chunk[i];
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        if (b === BACKSLASH) {
          this.escaped = true;
          this.captureBad = true;
        } else if (b === QUOTE) {
          this.inString = false;
          if (this.endString()) return;
        } else if (this.capture !== 0) {
          if (b >= 0x80 || this.captured.length >= MAX_RESPONSE_ID_CHARS) this.captureBad = true;
          else this.captured += String.fromCharCode(b);
        }
        continue;
      }
      if (this.depth === 0) {
        if (b === OPEN_BRACE) this.open(1);
        continue;
      }
      if (b === QUOTE) this.startString();
      else if (b === OPEN_BRACE) this.open(this.keyMatched && this.onPath() && this.depth < this.path.length ? 1 : 0);
      else if (b === OPEN_BRACKET) this.open(2);
      else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
        this.depth--;
        this.keyMatched = false;
        this.expectKey = false;
      } else if (b === COMMA) {
        this.expectKey = this.kinds[this.depth] !== 2;
        this.keyMatched = false;
      } else if (b === COLON) this.expectKey = false;
    }
    this.scanned += n;
    if (this.scanned > MAX_SCAN_BYTES) this.done = true;
  }

  private onPath(): boolean {
    return this.kinds[this.depth] === 1;
  }

  private open(kind: number): void {
    if (this.depth >= MAX_DEPTH) {
      this.done = true; // no answer nests its id this deep: stop rather than keep a stack
      return;
    }
    this.depth++;
    this.kinds[this.depth] = kind;
    this.expectKey = kind !== 2;
    this.keyMatched = false;
  }

  private startString(): void {
    this.inString = true;
    this.captured = '';
    this.captureBad = false;
    if (this.expectKey) this.capture = this.onPath() ? 1 : 0;
    else this.capture = this.keyMatched && this.onPath() && this.depth === this.path.length ? 2 : 0;
  }

  /** A string ended; true when it was the id (reading stops). */
  private endString(): boolean {
    const capture = this.capture;
    this.capture = 0;
    if (this.expectKey) {
      this.keyMatched = capture === 1 && !this.captureBad && this.captured === this.path[this.depth - 1];
      return false;
    }
    this.keyMatched = false;
    if (capture === 2 && !this.captureBad && this.captured.length > 0) {
      this.id = this.captured;
      this.done = true;
      return true;
    }
    return false;
  }
}
