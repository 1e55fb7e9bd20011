/**
 * A scriptable upstream for gateway tests (node:http): each request is answered by the behaviour set
 * for its test, and the server records what it received and when each request's connection closed.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  closedEarly: boolean;
  closedAt?: number;
}

export type Behaviour = (req: IncomingMessage, res: ServerResponse, rec: Received) => void;

export interface TestUpstream {
  endpoint: string; // HOST:PORT
  received: Received[];
  behaviour: Behaviour;
  close(): Promise<void>;
}

export async function startUpstream(behaviour: Behaviour): Promise<TestUpstream> {
  const up: TestUpstream = { endpoint: '', received: [], behaviour, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    // Only inference calls get the test's behaviour; the gateway's own polling (/metrics, /v1/models)
    // gets a 404, so it never shares a test's counters or its large bodies.
    if (req.method !== 'POST') {
      req.resume();
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString(), closedEarly: false };
      up.received.push(rec);
      res.on('close', () => {
        if (!res.writableFinished) {
          rec.closedEarly = true;
          rec.closedAt = Date.now();
        }
      });
      up.behaviour(req, res, rec);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  up.endpoint = `127.0.0.1:${(server.address() as { port: number }).port}`;
  up.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return up;
}

/** The SSE body of a chat completion: `n` content chunks, then the usage chunk and [DONE]. */
export function sseBody(n: number, id = 'chatcmpl-test'): string {
  let s = '';
  for (let i = 0; i < n; i++) {
    const choice = { index: 0, delta: i === 0 ? { role: 'assistant', content: `tok${i} ` } : { content: `tok${i} ` }, finish_reason: i === n - 1 ? 'length' : null };
    s += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: 'test-model', choices: [choice] })}\n\n`;
  }
  s += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: 'test-model', choices: [], usage: { prompt_tokens: 7, completion_tokens: n, total_tokens: 7 + n } })}\n\n`;
  s += 'data: [DONE]\n\n';
  return s;
}

/**
 * An SSE body as a client that did not ask for usage receives it through the gateway: the gateway asks
 * every stream for its usage chunk (to count tokens) and takes it out for such a client.
 */
export function withoutUsage(sse: string): string {
  return sse.split(/(?<=\n\n)/).filter((e) => !(e.includes('"usage"') && e.includes('"choices":[]'))).join('');
}

/** Writes an SSE body event by event, each in its own write, `gapMs` apart. */
export function streamSse(res: ServerResponse, body: string, gapMs = 0): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-upstream': 'yes' });
  const events = body.split(/(?<=\n\n)/);
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    if (i >= events.length) {
      res.end();
      return;
    }
    res.write(events[i++]);
    if (gapMs > 0) setTimeout(next, gapMs);
    else setImmediate(next);
  };
  next();
}

export const CHAT_JSON = JSON.stringify({
  id: 'chatcmpl-json', object: 'chat.completion', created: 1, model: 'test-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
});

export function chatBody(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], ...extra });
}
