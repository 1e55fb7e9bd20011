// Aborts, retries, mid-stream failure, backpressure and shutdown, with real processes and sockets.
import t from 'tap';
import { request } from 'undici';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import { startGateway, gatewayConfig, freePort, until } from '../helpers/process.js';
import { startUpstream, sseBody, streamSse, chatBody } from '../helpers/upstream.js';

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
    t.equal(await res.body.text(), full);
  }
  const m = await (await request(`${gw.adminUrl}/metrics`)).body.text();
  t.match(m, /infergate_retries_total\{pool="p"\} [1-9]/);

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
    t.equal(await res.body.text(), body, `request ${i}: the healthy endpoint's answer`);
  }
  t.ok(overloaded.received.length >= 1, `the overloaded endpoint was tried (${overloaded.received.length}×) and its 503 never reached the client`);
  t.equal(healthy.received.length, 4, 'each request reached the healthy endpoint once');
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

t.test('SIGTERM lets an in-flight stream finish, then exits 0', async (t) => {
  const body = sseBody(20);
  const up = await startUpstream((_req, res) => streamSse(res, body, 50));
  const gw = await startGateway(gatewayConfig([up.endpoint]));
  t.teardown(() => up.close());
  const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', body: chatBody({ stream: true }) });
  const text = res.body.text();
  gw.proc.child.kill('SIGTERM');
  t.equal(await text, body, 'the stream completed');
  t.equal(await gw.proc.exited(10_000), 0, 'exit code 0');
});
