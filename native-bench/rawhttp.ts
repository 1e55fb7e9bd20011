/**
 * HTTP/1.1 over a bare socket (node:net), for the reliability cases and the fuzz tests: the request is
 * written as the exact bytes given (malformed heads, smuggling shapes, bodies cut short or sent one byte at
 * a time), and what comes back is read as bytes and parsed here, so that a malformed answer is seen as
 * malformed rather than mended by a client library.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** the body's framing ended (its length reached, the last chunk, or the close for an unframed body) */
  complete: boolean;
}

export interface RawResult {
  responses: RawResponse[];
  /** the server closed the connection (or reset it) */
  closed: boolean;
  /** the deadline passed with the exchange unfinished: no answer and no close */
  timedOut: boolean;
  /** bytes that are not HTTP/1.1 responses, said how */
  malformed: string | null;
  /** the client ended the exchange on purpose (abortAfterBytes, neverReadMs) */
  clientAborted: boolean;
}

export interface RawPlan {
  host: string;
  port: number;
  /** written in order; a number is a pause of that many ms between writes */
  parts: Array<Buffer | string | number>;
  /** half-close (FIN) after the last part */
  endAfterSend?: boolean;
  /** the whole exchange's bound, in ms */
  deadlineMs: number;
  /** after the first response is whole, keep reading until the server closes (or the deadline) */
  waitForClose?: boolean;
  /** the request was HEAD: its answer has headers only, whatever length they declare */
  head?: boolean;
  /** destroy the socket once this many response bytes arrived (a client that hangs up mid-stream) */
  abortAfterBytes?: number;
  /** stop reading at once and destroy the socket after this many ms (a client that never reads) */
  neverReadMs?: number;
}

/** Sends `plan.parts` and collects the answers until the first final one is whole, the server closes, or the deadline. */
export function rawExchange(plan: RawPlan): Promise<RawResult> {
  return new Promise((resolve) => {
    const sock = connect({ host: plan.host, port: plan.port });
    let received: Buffer = Buffer.alloc(0);
    let finished = false;
    let clientAborted = false;
    let closed = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (timedOut: boolean): void => {
      if (finished) return;
      finished = true;
      for (const t of timers) clearTimeout(t);
      sock.destroy();
      const parsed = parseResponses(received, closed, plan.head);
      resolve({ responses: parsed.responses, closed, timedOut, malformed: parsed.malformed, clientAborted });
    };
    timers.push(setTimeout(() => finish(true), plan.deadlineMs));
    sock.on('error', () => {
      closed = true;
      finish(false);
    });
    sock.on('close', () => {
      closed = true;
      finish(false);
    });
    sock.on('data', (d: Buffer) => {
      received = received.length === 0 ? d : Buffer.concat([received, d]);
      if (plan.abortAfterBytes !== undefined && received.length >= plan.abortAfterBytes) {
        clientAborted = true;
        finish(false);
        return;
      }
      if (plan.waitForClose) return;
      const parsed = parseResponses(received, false, plan.head);
      const answer = finalAnswer(parsed.responses);
      if (parsed.malformed !== null || (answer !== undefined && answer.complete)) finish(false);
    });
    sock.once('connect', async () => {
      if (plan.neverReadMs !== undefined) {
        sock.pause();
        timers.push(
          setTimeout(() => {
            clientAborted = true;
            finish(false);
          }, plan.neverReadMs),
        );
      }
      for (const p of plan.parts) {
        if (finished) return;
        if (typeof p === 'number') await new Promise((r) => timers.push(setTimeout(r, p)));
        else if (!sock.destroyed) sock.write(p);
      }
      if (plan.endAfterSend && !finished) sock.end();
    });
  });
}

/** The first answer that is not an interim one (1xx, such as 100 Continue). */
export function finalAnswer(responses: RawResponse[]): RawResponse | undefined {
  return responses.find((r) => r.status >= 200);
}

const CRLF2 = Buffer.from('\r\n\r\n');

/**
 * Responses in `buf`, in order. `closed`: no more bytes will come, so a body without a declared length
 * ends here. `headRequest`: the first request was HEAD, so the first answer has no body. A head that is not `HTTP/1.1 NNN …` with `Name: value` lines is `malformed`.
 */
export function parseResponses(buf: Buffer, closed: boolean, headRequest = false): { responses: RawResponse[]; malformed: string | null } {
  const responses: RawResponse[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const headEnd = buf.indexOf(CRLF2, pos);
    if (headEnd < 0) {
      return { responses, malformed: closed ? `an unfinished response head: ${JSON.stringify(buf.subarray(pos, pos + 80).toString('latin1'))}` : null };
    }
    const lines = buf.subarray(pos, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.1 ([1-5]\d\d) [^\r\n]*$/.exec(lines[0]);
    if (!m) return { responses, malformed: `a bad status line: ${JSON.stringify(lines[0].slice(0, 80))}` };
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const c = line.indexOf(':');
      if (c <= 0 || /[\s]/.test(line.slice(0, c))) return { responses, malformed: `a bad header line: ${JSON.stringify(line.slice(0, 80))}` };
      const name = line.slice(0, c).toLowerCase();
      const value = line.slice(c + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    const status = Number(m[1]);
    let start = headEnd + 4;
    if (status < 200 || status === 204 || status === 304 || (headRequest && finalAnswer(responses) === undefined)) {
      responses.push({ status, headers, body: Buffer.alloc(0), complete: true });
      pos = start;
      continue;
    }
    if (headers['transfer-encoding'] !== undefined) {
      if (headers['transfer-encoding'].toLowerCase() !== 'chunked') return { responses, malformed: `transfer-encoding ${headers['transfer-encoding']}` };
      const parts: Buffer[] = [];
      let complete = false;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', start);
        if (lineEnd < 0) break;
        const sizeText = buf.subarray(start, lineEnd).toString('latin1').split(';')[0].trim();
        if (!/^[0-9a-fA-F]+$/.test(sizeText)) return { responses, malformed: `a bad chunk size: ${JSON.stringify(sizeText.slice(0, 20))}` };
        const size = parseInt(sizeText, 16);
        if (size === 0) {
          // no trailers are expected: the last chunk is followed by an empty line
          if (buf.length < lineEnd + 4) break;
          start = lineEnd + 4;
          complete = true;
          break;
        }
        if (buf.length < lineEnd + 2 + size + 2) break;
        parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        start = lineEnd + 2 + size + 2;
      }
      responses.push({ status, headers, body: Buffer.concat(parts), complete });
      if (!complete) return { responses, malformed: null };
      pos = start;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      if (!/^\d+$/.test(headers['content-length'])) return { responses, malformed: `content-length ${headers['content-length']}` };
      const len = Number(headers['content-length']);
      const complete = buf.length >= start + len;
      responses.push({ status, headers, body: buf.subarray(start, Math.min(buf.length, start + len)), complete });
      if (!complete) return { responses, malformed: null };
      pos = start + len;
      continue;
    }
    // no length: the body runs to the close
    responses.push({ status, headers, body: buf.subarray(start), complete: closed });
    return { responses, malformed: null };
  }
  return { responses, malformed: null };
}

/** A body as chunked transfer coding, `size` bytes per chunk. */
export function chunked(body: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += size) {
    const piece = body.subarray(i, i + size);
    out.push(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
  }
  out.push(Buffer.from('0\r\n\r\n'));
  return out;
}

/** A request head: the request line, `Host`, then the given header lines as they are (no checks). */
export function head(method: string, path: string, host: string, lines: string[]): Buffer {
  return Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, 'latin1');
}

/**
 * What a client can tell of an answer: `truncated` when the framing was whole but the content is not (a
 * 200 SSE stream without `[DONE]` or an error event; a 200 JSON answer that does not parse), `errorShape`
 * false when an error status does not carry OpenAI's `{"error": {...}}` body.
 */
/** The last event of a whole Responses API stream: completed, incomplete or failed, its data one line. */
const RESPONSES_END = /(^|\n)event: response\.(completed|incomplete|failed)\ndata: [^\n]*\n\n$/;

export function judge(r: RawResponse): { truncated: boolean; errorShape: boolean } {
  const text = r.body.toString('utf8');
  const type = r.headers['content-type'] ?? '';
  let truncated = false;
  if (r.status === 200 && r.complete) {
    // a chat or completions stream ends with [DONE], a Responses API stream with its terminal event
    if (type.startsWith('text/event-stream')) truncated = !text.endsWith('data: [DONE]\n\n') && !RESPONSES_END.test(text) && !/(^|\n)data: \{"error":/.test(text);
    else if (type.includes('json')) truncated = !parses(text);
  }
  let errorShape = true;
  if (r.status >= 400 && r.complete && r.headers['content-type']?.includes('json')) {
    try {
      const e = JSON.parse(text) as { error?: { message?: unknown } };
      errorShape = typeof e.error?.message === 'string';
    } catch {
      errorShape = false;
    }
  }
  return { truncated, errorShape };
}

function parses(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}
