// Aborts, retries, mid-stream failure, backpressure and shutdown, with real processes and sockets.
import t from 'tap';
import { request } from 'undici';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { startGateway, gatewayConfig, freePort, until } from '../helpers/process.js';
import { startUpstream, sseBody, streamSse, chatBody, CHAT_JSON, withoutUsage } from '../helpers/upstream.js';

t.test('a client that hangs up cancels the upstream request within a second', async (t) => {
  const up = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const timer = setInterval(() => res.write('data: {"choices":[{"delta":{"content":"x"}}]}\n\n'), 20);
    res.on('close', () => clearInterval(timer));
  });
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await up.close();
  });
  const ac = new AbortController();
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }), signal: ac.signal });
  const reader = res.body;
  await new Promise<void>((r) => reader.once('data', () => r()));
  const abortedAt = Date.now();
  ac.abort();
  const rec = await until(() => up.received[0]?.closedEarly && up.received[0], 3000, 'upstream to see the close');
  t.ok(rec.closedAt! - abortedAt < 1000, `upstream saw the close after ${rec.closedAt! - abortedAt} ms`);
  const m = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(m, /infergate_requests_total\{[^}]*code="499"[^}]*\} 1/, 'counted as a client abort');
});

t.test('a refused endpoint is retried on another; mid-stream death ends with an error event', async (t) => {
  const dead = await freePort();
  const full = sseBody(30);
  const up = await startUpstream((_req, res) => streamSse(res, full));
  const gw = await startGateway(gatewayConfig([`127.0.0.1:${dead}`, up.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await up.close();
  });
  for (let i = 0; i < 4; i++) {
    const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
    t.equal(res.statusCode, 200, `request ${i} served despite the dead endpoint`);
    t.equal(res.headers['x-infergate-endpoint'], up.endpoint);
    t.equal(await res.body.text(), withoutUsage(full));
  }
  const m = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(m, /infergate_retries_total\{pool="p",reason="connect"\} [1-9]/);

  up.behaviour = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(full.split('\n\n').slice(0, 3).join('\n\n') + '\n\n');
    setTimeout(() => res.socket?.destroy(), 50);
  };
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
  t.equal(res.statusCode, 200);
  const text = await res.body.text();
  const events = text.trim().split('\n\n');
  t.equal(events.length, 4, 'three relayed events and one error event');
  const last = JSON.parse(events[3].slice(6)) as { error: { code: string; message: string } };
  t.equal(last.error.code, 'upstream_stream_broken');
  t.notMatch(text, up.endpoint.split(':')[1], 'no backend port in the error');
});

t.test('an endpoint answering 502/503 before any body is retried on another one', async (t) => {
  const overloaded = await startUpstream((_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"busy"}'));
  const body = sseBody(5);
  const healthy = await startUpstream((_req, res) => streamSse(res, body));
  const gw = await startGateway(gatewayConfig([overloaded.endpoint, healthy.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await overloaded.close();
    await healthy.close();
  });
  for (let i = 0; i < 4; i++) {
    const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
    t.equal(res.statusCode, 200, `request ${i}: 200`);
    t.equal(await res.body.text(), withoutUsage(body), `request ${i}: the healthy endpoint's answer`);
  }
  t.ok(overloaded.received.length >= 1, `the overloaded endpoint was tried (${overloaded.received.length}×) and its 503 never reached the client`);
  t.equal(healthy.received.length, 4, 'each request reached the healthy endpoint once');
});

t.test('a non-streamed answer cut by the model server is a clean 502, never half a body', async (t) => {
  const json = JSON.stringify({ id: 'chatcmpl-cut', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(4000) } }] });
  const cut = (res: import('node:http').ServerResponse) => {
    res.write(json.slice(0, 1000));
    setTimeout(() => res.socket?.destroy(), 50);
  };
  const up = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(json.length) });
    cut(res);
  });
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await up.close();
  });
  const ask = async () => {
    const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  };
  const check = (r: { status: number; text: string }, what: string) => {
    t.equal(r.status, 502, `${what}: 502`);
    t.equal((JSON.parse(r.text) as { error: { code: string } }).error.code, 'upstream_stream_broken', `${what}: an OpenAI error body`);
    t.notMatch(r.text, up.endpoint.split(':')[1], `${what}: no backend port in the error`);
  };
  check(await ask(), 'with a Content-Length');

  // No Content-Length (chunked): the request did not ask to stream, so the answer is gathered too.
  up.behaviour = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    cut(res);
  };
  check(await ask(), 'chunked');

  // The same chunked answer, whole: passed on intact, with its length.
  up.behaviour = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(json.slice(0, 1000));
    setTimeout(() => res.end(json.slice(1000)), 20);
  };
  const whole = await ask();
  t.equal(whole.status, 200);
  t.equal(whole.text, json, 'the whole chunked answer');
  t.equal(whole.headers['content-length'], String(json.length), 'sent with its length');

  // Over the 1 MiB the gateway gathers, it is passed on as it comes; a cut then closes the connection,
  // so the client sees an error rather than a body that looks complete.
  const big = Buffer.alloc(3 << 20, 'y');
  up.behaviour = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(big);
    setTimeout(() => res.socket?.destroy(), 100);
  };
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
  t.equal(res.statusCode, 200, 'a long answer started before the cut');
  await t.rejects(res.body.text(), 'the cut reaches the client as a broken connection');
  const m = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(m, /infergate_upstream_errors_total\{pool="p",kind="stream"\} 3/, 'three mid-answer failures counted');
});

t.test('the gateway closes an idle upstream connection before a model server would (uvicorn: 5 s)', async (t) => {
  // A server that keeps connections open: whoever closes one here is the gateway.
  const closedAt: number[] = [];
  const server = createServer((req, res) => {
    const sock = req.socket as Socket & { inference?: boolean };
    if (req.method === 'POST' && !sock.inference) {
      sock.inference = true;
      sock.once('close', () => closedAt.push(Date.now()));
    }
    req.resume();
    req.on('end', () => res.writeHead(req.method === 'POST' ? 200 : 404, { 'content-type': 'application/json' }).end(CHAT_JSON));
  });
  // No idle limit and, like uvicorn, no `Keep-Alive: timeout=N` hint (undici would follow a hint).
  server.keepAliveTimeout = 0;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const gw = await startGateway(gatewayConfig([`127.0.0.1:${(server.address() as AddressInfo).port}`]));
  t.teardown(async () => {
    await gw.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody() });
  t.equal(await res.body.text(), CHAT_JSON);
  const answeredAt = Date.now();
  await until(() => closedAt.length > 0, 8000, 'the idle upstream connection to close');
  const idle = closedAt[0] - answeredAt;
  // set to 4 s; undici's timers tick every ~0.5 s, so the close comes at 4–4.5 s: before uvicorn's 5 s
  t.ok(idle < 5000, `closed by the gateway after ${idle} ms idle`);
});

t.test('a slow-reading client against a 50 MB answer keeps the gateway memory bounded', async (t) => {
  const total = 50 * 1024 * 1024;
  let written = 0;
  const up = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 'z');
    const pump = () => {
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await up.close();
  });
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gw.proc.child.pid}/status`, 'utf8'))![1]) * 1024;
  const before = rss();
  const url = new URL(gw.url);
  const sock = connect(Number(url.port), url.hostname);
  const body = chatBody();
  sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  sock.pause(); // read nothing for now
  // Wait until the upstream is blocked by backpressure: its written count stops growing.
  let last = -1;
  await until(async () => {
    const stable = written === last && written > 0;
    last = written;
    await new Promise((r) => setTimeout(r, 300));
    return stable;
  }, 15_000, 'upstream to be held back');
  t.ok(written < total / 4, `upstream held back after ${(written / 1e6).toFixed(1)} MB of 50 MB`);
  const peak = rss();
  t.ok(peak - before < 40 * 1024 * 1024, `gateway RSS grew ${((peak - before) / 1e6).toFixed(1)} MB while the client read nothing`);
  // Now read everything: the whole answer arrives.
  let got = 0;
  sock.on('data', (d: Buffer) => (got += d.length));
  sock.resume();
  await until(() => written >= total && got > total, 30_000, 'the whole answer to arrive');
  t.ok(got > total, 'all 50 MB reached the client');
  sock.destroy();
});

t.test('SIGTERM lets an in-flight stream finish, closes kept-alive connections, then exits 0', async (t) => {
  const body = sseBody(20);
  const up = await startUpstream((_req, res) => streamSse(res, body, 50));
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(async () => {
    await gw.stop();
    await up.close();
  });
  const url = new URL(gw.url);
  // Two raw keep-alive connections, each used once (a 400 answered by the gateway itself).
  const open = async () => {
    const sock = connect(Number(url.port), url.hostname);
    let data = '';
    let ended = false;
    sock.on('data', (d: Buffer) => (data += d.toString()));
    sock.on('close', () => (ended = true));
    const ask = async (): Promise<string> => {
      const from = data.length;
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
      return until(() => {
        const got = data.slice(from);
        const end = got.indexOf('\r\n\r\n');
        const len = /\r\ncontent-length: (\d+)\r\n/i.exec(got.slice(0, end + 2));
        return end >= 0 && len && got.length >= end + 4 + Number(len[1]) ? got : undefined;
      }, 5000, 'an answer on the raw connection');
    };
    return { sock, ask, isEnded: () => ended };
  };
  const a = await open();
  const idle = await open();
  t.match(await a.ask(), /^HTTP\/1\.1 400 /, 'a kept-alive connection before shutdown');
  t.match(await idle.ask(), /^HTTP\/1\.1 400 /, 'another, left idle');
  t.teardown(() => {
    a.sock.destroy();
    idle.sock.destroy();
  });

  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
  const text = res.body.text();
  gw.proc.child.kill('SIGTERM');
  // Ask on the kept-alive connection until the signal has been handled (answers before that are 400s).
  const during = await until(async () => {
    const r = await a.ask();
    return /^HTTP\/1\.1 400 /.test(r) ? undefined : r;
  }, 3000, 'the drain to start');
  t.match(during, /^HTTP\/1\.1 503 /, 'a new request during the drain: 503');
  t.match(during, /"code":"shutting_down"/);
  await until(() => a.isEnded(), 3000, 'the gateway to close that connection after its answer');
  t.pass('the connection is closed after the 503');
  t.equal(await text, withoutUsage(body), 'the in-flight stream completed');
  const doneAt = Date.now();
  t.equal(await gw.proc.exited(3000), 0, 'exit code 0');
  t.ok(Date.now() - doneAt < 3000, `exited ${Date.now() - doneAt} ms after the last answer, an idle kept-alive connection notwithstanding`);
});
