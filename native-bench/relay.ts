/**
 * The floor of infergate's stack, for the `overhead` scenario's `relay` target: the least a uWS +
 * undici-dispatch proxy does for one POST (collect the body, dispatch it to one undici Pool, stream SSE
 * through or send the whole answer with its content type, backpressure and abort handled). No routing,
 * config, header forwarding, request ids, metrics, timeouts or retries: not a product, only a measure of
 * how much of infergate's cost per request is the stack itself.
 *
 * Run as a process with the bench CLI's hidden subcommand `relay --port N --upstream URL`; it prints
 * `relay listening on http://127.0.0.1:N`.
 */
import { loadUws } from '../src/common/uws.js';
import { listenExclusive } from '../src/common/listen.js';
import { Pool, type Dispatcher } from 'undici';

export function startRelay(port: number, upstream: string): Promise<void> {
  const pool = new Pool(upstream, { headersTimeout: 600_000, bodyTimeout: 600_000 });
  const uWS = loadUws(); // refuses the slow fallback
  const app = uWS.App();
  app.post('/*', (res, req) => {
    const path = req.getUrl();
    const contentType = req.getHeader('content-type') || 'application/json';
    let gone = false;
    let controller: Dispatcher.DispatchController | undefined;
    const chunks: Buffer[] = [];
    res.onAborted(() => {
      gone = true;
      controller?.abort(new Error('client gone'));
    });
    res.onData((ab, last) => {
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (!last) return;
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      let status = '502 Bad Gateway';
      let type = '';
      let stream = false;
      const out: Buffer[] = [];
      pool.dispatch({ path, method: 'POST', headers: { 'content-type': contentType }, body }, {
        onRequestStart: (c) => { controller = c; },
        onResponseStart: (_c, code, headers) => {
          status = `${code} ${code === 200 ? 'OK' : 'Upstream'}`;
          type = String(headers['content-type'] ?? '');
          stream = type.startsWith('text/event-stream');
        },
        onResponseData: (c, chunk) => {
          if (gone) return;
          if (!stream) {
            out.push(chunk);
            return;
          }
          let ok = true;
          res.cork(() => {
            if (out.length === 0) {
              res.writeStatus(status).writeHeader('content-type', type);
              out.push(chunk.subarray(0, 0)); // marks the head as written
            }
            ok = res.write(chunk);
          });
          if (!ok) {
            c.pause();
            res.onWritable(() => {
              c.resume();
              return true;
            });
          }
        },
        onResponseEnd: () => {
          if (gone) return;
          res.cork(() => {
            if (stream) res.end();
            else res.writeStatus(status).writeHeader('content-type', type).end(out.length === 1 ? out[0] : Buffer.concat(out));
          });
        },
        onResponseError: () => {
          if (!gone) res.cork(() => res.writeStatus('502 Bad Gateway').end());
        },
      });
    });
  });
  return new Promise((resolve, reject) => {
    listenExclusive(app, '127.0.0.1', port, (s) => (s ? resolve() : reject(new Error(`relay: cannot listen on ${port}`))));
  });
}
