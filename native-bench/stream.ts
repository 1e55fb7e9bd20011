/**
 * One streaming chat completion as a client sees it: time to first token, the gaps between tokens,
 * end-to-end time, tokens received, the HTTP status and which endpoint served (x-infergate-endpoint).
 */
import type { Dispatcher } from 'undici';

export interface StreamOutcome {
  status: number;
  /** ms from send to the first content token (NaN if none) */
  ttftMs: number;
  /** ms between successive token arrivals */
  itlMs: number[];
  /** ms from send to the end of the stream (or the error) */
  e2eMs: number;
  tokens: number;
  endpoint: string | null;
  /** set when the request failed: status ≥ 400 (other than 429), transport error, or a stream without [DONE] */
  error: string | null;
}

/** Feeds SSE bytes; calls onToken(now) for each event carrying content; reports [DONE]. Exported for tests. */
export class SseTokenCounter {
  private buf = '';
  done = false;
  usageTokens: number | null = null;
  constructor(private readonly onToken: () => void) {}
  push(chunk: string): void {
    this.buf += chunk;
    let cut: number;
    while ((cut = this.buf.indexOf('\n\n')) >= 0) {
      const ev = this.buf.slice(0, cut);
      this.buf = this.buf.slice(cut + 2);
      for (const line of ev.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') { this.done = true; continue; }
        try {
          const o = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string }; text?: string }>; usage?: { completion_tokens?: number } | null };
          const c = o.choices?.[0];
          const text = c?.delta?.content ?? c?.text;
          if (typeof text === 'string' && text.length > 0) this.onToken();
          if (o.usage && typeof o.usage.completion_tokens === 'number') this.usageTokens = o.usage.completion_tokens;
        } catch {
          /* not JSON: ignore */
        }
      }
    }
  }
}

export async function streamCompletion(dispatcher: Dispatcher, path: string, body: Buffer, signal?: AbortSignal): Promise<StreamOutcome> {
  const start = performance.now();
  let first = NaN;
  let last = NaN;
  const itl: number[] = [];
  let tokens = 0;
  const out: StreamOutcome = { status: 0, ttftMs: NaN, itlMs: itl, e2eMs: NaN, tokens: 0, endpoint: null, error: null };
  try {
    const res = await dispatcher.request({ path, method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, signal });
    out.status = res.statusCode;
    const ep = res.headers['x-infergate-endpoint'];
    out.endpoint = Array.isArray(ep) ? ep[0] : (ep ?? null);
    if (res.statusCode !== 200) {
      let text = '';
      for await (const c of res.body) if (text.length < 500) text += c;
      if (res.statusCode !== 429) out.error = `HTTP ${res.statusCode}: ${text.slice(0, 200)}`;
    } else {
      // Tokens in one network read arrive together: they share an arrival time (gap 0), as a real client sees them.
      let now = 0;
      const counter = new SseTokenCounter(() => {
        tokens++;
        if (Number.isNaN(first)) first = now;
        else itl.push(now - last);
        last = now;
      });
      res.body.setEncoding('utf8');
      for await (const c of res.body) {
        now = performance.now();
        counter.push(c as string);
      }
      if (!counter.done) out.error = 'stream ended without [DONE]';
      else if (tokens === 0) out.error = 'no tokens';
    }
  } catch (e) {
    out.error = (e as Error).name === 'AbortError' ? 'aborted at the run deadline' : `transport: ${(e as Error).message}`;
  }
  out.e2eMs = performance.now() - start;
  out.ttftMs = Number.isNaN(first) ? NaN : first - start;
  out.tokens = tokens;
  return out;
}
