// CORS as a browser enforces it: Debian's chromium (through playwright-core) opens a page from an allowed
// origin and one from another origin, and each calls the gateway with fetch as a web app would (a bearer
// token and a JSON body: a preflighted request), reading a streamed chat completion. The allowed page
// reads the stream and the x-request-id header; the other page's fetch fails in the browser. A request
// without a token is refused even from the allowed page.
import t from 'tap';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { chromium } from 'playwright-core';
import { MODEL, startApi } from './support.js';
import { skipWithout } from '../helpers/tools.js';

const CHROMIUM = '/usr/bin/chromium';
// missing: an error, unless this run says it goes without (the Node 24 test image: INFERGATE_TEST_WITHOUT)
const skip = skipWithout('chromium', existsSync(CHROMIUM), `apt-get install -y chromium for ${CHROMIUM} (.ci/run does it)`);
if (skip !== undefined) t.plan(0, skip);
else {

  /** A page server on a port of its own (each port is an origin). */
  function pageServer(): Promise<{ server: Server; origin: string }> {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>app</title><p>app</p>');
    });
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` })));
  }

  const allowed = await pageServer();
  const other = await pageServer();
  const api = await startApi({ cors: { origins: [allowed.origin] } });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  t.teardown(async () => {
    await browser.close();
    await api.stop();
    allowed.server.close();
    other.server.close();
  });

  interface Outcome {
    ok: boolean;
    status?: number;
    requestId?: string | null;
    events?: number;
    done?: boolean;
    error?: string;
  }

  /** From a page at `origin`: POST a streamed chat completion to the gateway with fetch, read it through. */
  async function fetchFrom(origin: string, token: string | null): Promise<Outcome> {
    const page = await browser.newPage();
    try {
      await page.goto(`${origin}/`);
      return await page.evaluate(
        async ({ url, token, body }) => {
          try {
            const headers: Record<string, string> = { 'content-type': 'application/json' };
            if (token) headers.authorization = `Bearer ${token}`;
            const r = await fetch(url, { method: 'POST', headers, body });
            const reader = r.body!.getReader();
            const dec = new TextDecoder();
            let text = '';
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              text += dec.decode(value, { stream: true });
            }
            return { ok: true, status: r.status, requestId: r.headers.get('x-request-id'), events: text.split('\n\n').filter((e) => e.startsWith('data: {')).length, done: text.endsWith('data: [DONE]\n\n') };
          } catch (e) {
            return { ok: false, error: String(e) };
          }
        },
        { url: `${api.gw.url}/v1/chat/completions`, token, body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi from a browser' }], max_tokens: 5, stream: true }) },
      );
    } finally {
      await page.close();
    }
  }

  t.test('a page from the allowed origin streams a completion and reads x-request-id', async (t) => {
    const r = await fetchFrom(allowed.origin, api.token);
    t.ok(r.ok, r.error ?? 'fetch succeeded');
    t.equal(r.status, 200);
    t.equal(r.done, true, 'the stream ended with [DONE]');
    t.ok((r.events ?? 0) >= 5, `${r.events} data events`);
    t.match(r.requestId, /\S+/, 'an exposed header is readable');
  });

  t.test('a page from another origin cannot read the answer: the browser fails its fetch', async (t) => {
    const r = await fetchFrom(other.origin, api.token);
    t.equal(r.ok, false);
    t.match(r.error, /TypeError/);
  });

  t.test('the allowed page without a token: 401, readable by the page', async (t) => {
    const r = await fetchFrom(allowed.origin, null);
    t.ok(r.ok, r.error ?? 'fetch succeeded');
    t.equal(r.status, 401);
  });
}
