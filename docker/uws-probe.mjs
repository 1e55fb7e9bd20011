// Probes the wire behaviour of the uWebSockets.js build that infergate's loader picks on this host, for
// the facts the README and src/gateway/README.md state per build. Prints one line per fact.
//   node docker/uws-probe.mjs [PATH to dist/common/uws.js]        (default: this checkout's dist/)
// In the image (20.57 on Node 24):
//   docker run --rm --network host -v "$PWD/docker/uws-probe.mjs:/probe.mjs:ro" --entrypoint node \
//     infergate:latest /probe.mjs /app/dist/common/uws.js
import net from 'node:net';

const loader = process.argv[2] ?? new URL('../dist/common/uws.js', import.meta.url).href;
const { loadUws, uwsInUse } = await import(loader.startsWith('/') ? `file://${loader}` : loader);
const uws = loadUws();
console.log(`uws ${uwsInUse().version} on Node ${process.versions.node}`);

const app = uws.App();
app.get('/fast', (res) => res.end('fast'));
app.get('/slow', (res) => {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  setTimeout(() => !aborted && res.cork(() => res.end('slow')), 200);
});
app.head('/head', (res) => {
  res.onAborted(() => undefined); // 20.30 aborts the process without it
  res.endWithoutBody(42);
});
app.head('/head0', (res) => res.endWithoutBody());
app.post('/echo', (res) => {
  let body = Buffer.alloc(0);
  res.onAborted(() => undefined);
  res.onData((chunk, last) => {
    body = Buffer.concat([body, Buffer.from(chunk)]);
    if (last) res.end(`got ${body.length}:${body.toString()}`);
  });
});
app.get('/hdr', (res, req) => res.end(JSON.stringify(req.getHeader('x-v'))));
const port = await new Promise((resolve) => app.listen('127.0.0.1', 0, (tok) => resolve(uws.us_socket_local_port(tok))));

/** Sends raw bytes; collects what comes back until the peer closes or `ms` pass. */
function exchange(bytes, ms = 1500, halfClose = false) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', { allowHalfOpen: true });
    let out = '';
    let closed = false;
    s.on('data', (d) => (out += d.toString('latin1')));
    s.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ out, closed });
    });
    s.on('error', () => undefined);
    s.write(bytes);
    if (halfClose) s.end();
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ out, closed });
    }, ms);
  });
}
const statuses = (out) => [...out.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]).join(',') || 'none';
const report = (fact, r) => console.log(`${fact}: answers ${statuses(r.out)}${r.closed ? ', then closed' : ', kept open'}`);

report('HTTP/1.0 GET', await exchange('GET /fast HTTP/1.0\r\n\r\n'));
report('HTTP/1.1 GET without Host', await exchange('GET /fast HTTP/1.1\r\n\r\n'));
report('pipelined: slow then fast', await exchange('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n'));
report('pipelined: fast then fast', await exchange('GET /fast HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n'));
{
  const r = await exchange('HEAD /head HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
  const len = /content-length: *(\d+)/i.exec(r.out)?.[1];
  console.log(`HEAD with endWithoutBody(42): answers ${statuses(r.out)}, content-length ${len ?? 'none'}${r.closed ? ', then closed' : ''}`);
}
{
  const r = await exchange('HEAD /head0 HTTP/1.1\r\nHost: x\r\n\r\n');
  console.log(`HEAD with endWithoutBody(): ${JSON.stringify(r.out.split('\r\n').filter((l) => /^(HTTP|content-length|transfer-encoding)/i.test(l)))}`);
}
{
  const r = await exchange('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcdeGET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
  console.log(`two Content-Length lines (3, 5): ${statuses(r.out)}; body seen: ${/got [^\r\n]*$/m.exec(r.out)?.[0] ?? 'none'}`);
}
{
  const r = await exchange('POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked;q=1\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
  console.log(`Transfer-Encoding: chunked;q=1: ${statuses(r.out)}; ${/got [^\r\n]*$/m.exec(r.out)?.[0] ?? 'no body'}`);
}
for (const [what, chunks] of [['a chunk extension (3;foo=bar)', '3;foo=bar\r\nabc\r\n0\r\n\r\n'], ['one on the last chunk (0;x=y)', '3\r\nabc\r\n0;x=y\r\n\r\n']]) {
  const r = await exchange(`POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}`);
  console.log(`${what}: ${statuses(r.out)}; ${/got [^\r\n]*$/m.exec(r.out)?.[0] ?? 'no body'}${r.closed ? ', closed' : ''}`);
}
{
  const r = await exchange('POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n');
  console.log(`a chunked body with a trailer field: ${statuses(r.out)}; ${/got [^\r\n]*$/m.exec(r.out)?.[0] ?? 'no body'}${r.closed ? ', closed' : ''}`);
}
for (const cl of ['abc', '+3', '-1', '0x3', '3, 3', '99999999999999999999']) {
  const r = await exchange(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\nabc`);
  console.log(`Content-Length: ${cl}: ${statuses(r.out)}; ${/got [^\r\n]*$/m.exec(r.out)?.[0] ?? 'no body'}${r.closed ? ', closed' : ''}`);
}
for (const [what, req] of [['POST', 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc'], ['GET', 'GET /slow HTTP/1.1\r\nHost: x\r\n\r\n']]) {
  const r = await exchange(req, 1500, true);
  console.log(`a whole ${what} then a half-close (FIN): ${statuses(r.out)}`);
}
{
  const r = await exchange(Buffer.from('GET /hdr HTTP/1.1\r\nHost: x\r\nx-v: café\r\n\r\n', 'utf8'));
  console.log(`header value "café" (UTF-8) arrives as: ${r.out.split('\r\n\r\n')[1] ?? 'no answer'}`);
}
process.exit(0);
