/**
 * Writing the answers of one mock server: each open request is a `Reply` whose output grows as its engine
 * produces tokens (SSE chunks built from prebuilt strings when streamed, the text when not) and is
 * written once per driver callback, corked. Streams end with the closing chunk, the usage chunk when asked
 * for, and `[DONE]`; non-streamed requests get one JSON answer at the end. A client that doesn't drain has
 * its output held up to a limit, then is cut off; the `cut` fault ends an answer midway.
 */
import { sseEvent, SSE_DATA_PREFIX, SSE_DONE } from '../openai/sse.js';
import type { AdmittedRequest } from './admission.js';
import { TOKEN_JSON, TOKEN_TEXT, tokenWord } from './text.js';

/** The calls made on a client's response (a uWS HttpResponse has them; this file needs no uWS). */
export interface ClientResponse {
  writeStatus(status: string): ClientResponse;
  writeHeader(key: string, value: string): ClientResponse;
  /** false when the data was buffered (the client is not draining) */
  write(chunk: string): boolean;
  end(body?: string): unknown;
  close(): unknown;
  cork(cb: () => void): unknown;
  onWritable(handler: (offset: number) => boolean): unknown;
}

/** Most a response may hold back while its client doesn't read (beyond that it is cut off). */
const MAX_PENDING_CHARS = 8 * 1024 * 1024;

// An SSE event ends with a blank line (openai/sse.ts frames it so); the chunk endings are prebuilt.
const CHAT_ROLE_CHUNK = '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n';
const CHAT_MORE = '"finish_reason":null}]}\n\n';
const TEXT_MORE = '"finish_reason":null,"stop_reason":null}]}\n\n';
const LAST: Record<'length' | 'stop', string> = {
  length: '"finish_reason":"length","stop_reason":null}]}\n\n',
  stop: '"finish_reason":"stop","stop_reason":null}]}\n\n',
};

/** One open request and its answer so far. */
export interface Reply {
  id: string;
  res: ClientResponse;
  chat: boolean;
  stream: boolean;
  includeUsage: boolean;
  model: string;
  /** unix seconds, as in every chunk */
  created: number;
  /** the request's text key (answer words) */
  key: number;
  promptTokens: number;
  maxTokens: number;
  finishReason: 'length' | 'stop';
  /** model time of arrival, ms */
  arrivalV: number;
  /** scheduled at least once (its queue time observed) */
  queued: boolean;
  /** model time of the last token, ms */
  lastV: number;
  outTokens: number;
  cachedTokens: number;
  /** token index after which the `cut` fault ends the answer; -1: none */
  cutAt: number;
  /** chunk prefix `data: {"id":...,"choices":[{"index":0,` */
  head: string;
  /** SSE chunks not yet written */
  buf: string;
  /** the answer text (non-streamed) */
  text: string;
  done: boolean;
  cut: boolean;
  /** the response is finished or closed: write nothing more */
  gone: boolean;
  /** backpressure: the client is not draining */
  bp: boolean;
  writableSet: boolean;
  /** output held while under backpressure */
  pending: string;
}

/** A new reply for an admitted request, arrived at model time `arrivalV`. */
export function newReply(
  res: ClientResponse,
  id: string,
  chat: boolean,
  req: AdmittedRequest,
  arrivalV: number,
  cut: boolean,
): Reply {
  const created = Math.floor(Date.now() / 1000);
  return {
    id,
    res,
    chat,
    stream: req.stream,
    includeUsage: req.includeUsage,
    model: req.model,
    created,
    key: req.key,
    promptTokens: req.tokens.length,
    maxTokens: req.maxTokens,
    finishReason: req.finishReason,
    arrivalV,
    queued: false,
    lastV: 0,
    outTokens: 0,
    cachedTokens: 0,
    cutAt: cut ? Math.floor(req.maxTokens / 2) : -1,
    head: `${SSE_DATA_PREFIX}{"id":"${id}","object":"${chunkObject(chat)}","created":${created},"model":${JSON.stringify(req.model)},"choices":[{"index":0,`,
    buf: '',
    text: '',
    done: false,
    cut: false,
    gone: false,
    bp: false,
    writableSet: false,
    pending: '',
  };
}

function chunkObject(chat: boolean): string {
  return chat ? 'chat.completion.chunk' : 'text_completion';
}

function usage(r: Reply): string {
  return `{"prompt_tokens":${r.promptTokens},"total_tokens":${r.promptTokens + r.outTokens},"completion_tokens":${r.outTokens},"prompt_tokens_details":{"cached_tokens":${r.cachedTokens}}}`;
}

/** The whole answer of a non-streamed request. */
export function finalBody(r: Reply): string {
  const reason = r.outTokens < r.maxTokens ? 'length' : r.finishReason;
  if (r.chat) {
    return `{"id":"${r.id}","object":"chat.completion","created":${r.created},"model":${JSON.stringify(r.model)},"choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(r.text)},"refusal":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"${reason}","stop_reason":null}],"service_tier":null,"system_fingerprint":null,"usage":${usage(r)},"prompt_logprobs":null}`;
  }
  return `{"id":"${r.id}","object":"text_completion","created":${r.created},"model":${JSON.stringify(r.model)},"choices":[{"index":0,"text":${JSON.stringify(r.text)},"logprobs":null,"finish_reason":"${reason}","stop_reason":null,"prompt_logprobs":null}],"service_tier":null,"system_fingerprint":null,"usage":${usage(r)}}`;
}

/** The open replies of one server and their writing. */
export class ReplyWriter {
  private readonly open = new Map<string, Reply>();
  /** replies with output to write at the next flush */
  private readonly touched = new Set<Reply>();
  /** SSE data events written (for throughput measurement) */
  sseEvents = 0;

  /**
   * `endpoint` gives the x-mock-endpoint header; `drop` takes a reply out of its engine (abort: the client
   * is gone, as opposed to a cut) and must call `remove`.
   */
  constructor(
    private readonly endpoint: () => string,
    private readonly drop: (r: Reply, abort: boolean) => void,
  ) {}

  get(id: string): Reply | undefined {
    return this.open.get(id);
  }

  /** Registers a reply; a stream's status and headers go out at once. */
  add(r: Reply): void {
    this.open.set(r.id, r);
    if (!r.stream) return;
    const res = r.res;
    res.cork(() => {
      res
        .writeStatus('200 OK')
        .writeHeader('content-type', 'text/event-stream; charset=utf-8')
        .writeHeader('cache-control', 'no-cache')
        .writeHeader('x-mock-endpoint', this.endpoint());
      // uWS sends the status line and headers with the first write
      res.write('');
    });
  }

  /** Forgets a reply; false when it was not open. */
  remove(r: Reply): boolean {
    if (!this.open.delete(r.id)) return false;
    this.touched.delete(r);
    return true;
  }

  /** Token `index` of the answer was produced. */
  token(r: Reply, index: number): void {
    r.outTokens = index + 1;
    const w = tokenWord(r.key, index);
    if (r.stream) {
      if (index === 0 && r.chat) {
        r.buf += r.head + CHAT_ROLE_CHUNK;
        this.sseEvents++;
      }
      const end = index === r.maxTokens - 1 ? LAST[r.finishReason] : r.chat ? CHAT_MORE : TEXT_MORE;
      r.buf += r.head + (r.chat ? '"delta":{"content":' + TOKEN_JSON[w] + '},"logprobs":null,' : '"text":' + TOKEN_JSON[w] + ',"logprobs":null,') + end;
      this.sseEvents++;
    } else {
      r.text += TOKEN_TEXT[w];
    }
    if (index === r.cutAt) r.cut = true;
    this.touched.add(r);
  }

  /** The answer is complete. */
  finished(r: Reply): void {
    r.done = true;
    this.touched.add(r);
  }

  /** Writes every touched reply's new output (one corked write each) and ends the finished ones. */
  flush(): void {
    if (this.touched.size === 0) return;
    for (const r of this.touched) {
      if (r.gone) continue;
      if (r.cut) this.cutOff(r);
      else if (r.done) this.end(r);
      else if (r.stream && r.buf) {
        const s = r.buf;
        r.buf = '';
        r.res.cork(() => this.write(r, s));
      }
    }
    this.touched.clear();
  }

  /** Closes every open response (the server is closing). */
  closeAll(): void {
    for (const r of [...this.open.values()]) {
      if (!r.gone) r.res.close();
    }
  }

  /** The `cut` fault: end the answer midway, without [DONE]. */
  private cutOff(r: Reply): void {
    r.gone = true;
    const res = r.res;
    res.cork(() => {
      if (r.stream && r.buf) this.write(r, r.buf);
      else if (!r.stream) res.writeStatus('200 OK').writeHeader('content-type', 'application/json').writeHeader('x-mock-endpoint', this.endpoint()).write('{"id":"' + r.id + '","object":');
    });
    res.close();
    this.drop(r, false);
  }

  private end(r: Reply): void {
    r.gone = true;
    this.open.delete(r.id);
    const res = r.res;
    if (!r.stream) {
      const body = finalBody(r);
      res.cork(() => {
        res.writeStatus('200 OK').writeHeader('content-type', 'application/json').writeHeader('x-mock-endpoint', this.endpoint());
        res.end(body);
      });
      return;
    }
    let tail = r.buf;
    r.buf = '';
    if (r.outTokens < r.maxTokens) {
      // stopped early (engine cap): close the choice explicitly
      tail += r.head + (r.chat ? '"delta":{},"logprobs":null,' : '"text":"","logprobs":null,') + LAST.length;
    }
    if (r.includeUsage) {
      tail += sseEvent(`{"id":"${r.id}","object":"${chunkObject(r.chat)}","created":${r.created},"model":${JSON.stringify(r.model)},"choices":[],"usage":${usage(r)}}`);
      this.sseEvents++;
    }
    tail += SSE_DONE;
    this.sseEvents++;
    const out = r.bp ? r.pending + tail : tail;
    r.pending = '';
    res.cork(() => res.end(out));
  }

  /** Write with bounded buffering: while the client doesn't drain, hold output (up to a limit). */
  private write(r: Reply, s: string): void {
    if (r.bp) {
      r.pending += s;
      if (r.pending.length > MAX_PENDING_CHARS && !r.gone) {
        r.gone = true;
        r.res.close();
        this.drop(r, true);
      }
      return;
    }
    if (!r.res.write(s)) {
      r.bp = true;
      if (!r.writableSet) {
        r.writableSet = true;
        r.res.onWritable(() => {
          if (r.gone) return true;
          r.bp = false;
          if (r.pending) {
            const p = r.pending;
            r.pending = '';
            if (!r.res.write(p)) r.bp = true;
          }
          return !r.bp;
        });
      }
    }
  }
}
