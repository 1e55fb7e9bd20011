// OTLP/HTTP export of request spans: an in-process receiver (node:http, collecting POST /v1/traces JSON
// bodies) behind a real gateway and a real mock vLLM server. The span of a request arrives with the trace
// id the client sent, the gateway's span id (the parent the model server was given) and the routing
// decision as attributes; a client's unsampled trace is not exported; a collector that is down costs the
// requests nothing.
import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { startGateway, gatewayConfig, freePort } from '../helpers/process.js';
import { startMocks, until } from '../e2e/support.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: OtlpValue }>;
  status?: { code?: number };
}
interface OtlpBody {
  resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

const bodies: OtlpBody[] = [];
const receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'POST' && req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString()) as OtlpBody);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    } else res.writeHead(404).end();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/v1/traces`;

const mock = await startMocks(1, ['--model', 'test-model', '--time-scale', '20', '--seed', '4']);
t.teardown(() => mock.kill());

const tracing = (url: string) => ({ otlp_endpoint: url, export_interval: '100ms', export_timeout: '2s', service_name: 'gw-under-test' });
const gw = await startGateway(gatewayConfig(mock.endpoints, { over: { tracing: tracing(receiverUrl), logging: { level: 'info', access_log: true } } }));
t.teardown(() => gw.stop());

function spans(): Array<{ span: OtlpSpan; service: string | undefined }> {
  return bodies.flatMap((b) =>
    b.resourceSpans.flatMap((rs) => {
      const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
      return rs.scopeSpans.flatMap((ss) => ss.spans.map((span) => ({ span, service })));
    }),
  );
}

function attr(s: OtlpSpan, key: string): string | number | boolean | undefined {
  const v = s.attributes.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  return v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue;
}

const chat = (headers: Record<string, string>, extra: Record<string, unknown> = {}) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 6, ...extra }),
    signal: AbortSignal.timeout(20_000),
  });

t.test('the span of a request arrives with the client\'s trace id and the routing decision', async (t) => {
  const traceId = '0af7651916cd43dd8448eb211c80319c';
  const r = await chat({ traceparent: `00-${traceId}-b7ad6b7169203331-01`, 'x-request-id': 'otlp-1' });
  t.equal(r.status, 200);
  const usage = ((await r.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
  const found = (await until(() => spans().find((s) => s.span.traceId === traceId), 15_000, 'the span at the receiver'))!;
  const s = found.span;
  t.equal(found.service, 'gw-under-test', 'service.name from tracing.service_name');
  t.equal(s.name, 'infergate.request');
  t.equal(s.kind, 2, 'a server span');
  t.equal(s.parentSpanId, 'b7ad6b7169203331', 'child of the client\'s span');
  t.equal(attr(s, 'http.response.status_code'), 200);
  t.equal(attr(s, 'infergate.request_id'), 'otlp-1');
  t.equal(attr(s, 'gen_ai.request.model'), 'test-model');
  t.equal(attr(s, 'infergate.pool'), 'p');
  t.equal(attr(s, 'infergate.endpoint'), mock.endpoints[0]);
  t.equal(attr(s, 'infergate.policy'), 'round_robin');
  t.equal(attr(s, 'infergate.retries'), 0);
  t.equal(attr(s, 'gen_ai.usage.input_tokens'), usage.prompt_tokens);
  t.equal(attr(s, 'gen_ai.usage.output_tokens'), usage.completion_tokens);
  // the access line names the same span, and so did the traceparent the model server got
  const line = await until(() => gw.proc.stdout().split('\n').find((l) => l.includes('"req_id":"otlp-1"')), 10_000, 'the access line');
  t.match(JSON.parse(line!), { trace_id: traceId, span_id: s.spanId });
});

t.test('no traceparent: a new trace, exported (sample_ratio 1); a refused request\'s span carries its error code', async (t) => {
  const r = await chat({ 'x-request-id': 'otlp-2' }, { model: 'nope' });
  t.equal(r.status, 404);
  await r.text();
  const line = await until(() => gw.proc.stdout().split('\n').find((l) => l.includes('"req_id":"otlp-2"')), 10_000, 'the access line');
  const { trace_id: traceId } = JSON.parse(line!) as { trace_id: string };
  const s = (await until(() => spans().find((x) => x.span.traceId === traceId), 15_000, 'the span'))!.span;
  t.equal(s.parentSpanId ?? '', '', 'a root span');
  t.equal(attr(s, 'http.response.status_code'), 404);
  t.equal(attr(s, 'error.type'), 'model_not_found');
});

t.test('a client\'s unsampled trace is followed: not exported', async (t) => {
  const traceId = '11111111111111111111111111111111';
  const r = await chat({ traceparent: `00-${traceId}-2222222222222222-00`, 'x-request-id': 'otlp-3' });
  await r.text();
  // a sampled request after it: once its span is in, the unsampled one would have been too (same batch or earlier)
  const after = '33333333333333333333333333333333';
  const r2 = await chat({ traceparent: `00-${after}-4444444444444444-01` });
  await r2.text();
  await until(() => spans().some((s) => s.span.traceId === after), 15_000, 'the later sampled span');
  t.notOk(spans().some((s) => s.span.traceId === traceId), 'the unsampled trace was not exported');
});

t.test('a collector that is down: requests are answered as usual, the failure is logged', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}/v1/traces`;
  const gw2 = await startGateway(gatewayConfig(mock.endpoints, { over: { tracing: tracing(dead), logging: { level: 'info', access_log: true } } }));
  t.teardown(() => gw2.stop());
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${gw2.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
    });
    t.equal(r.status, 200, `request ${i + 1}`);
    await r.text();
  }
  await gw2.proc.waitFor(/span export failed/, 15_000);
  t.pass('the export failure is logged');
  t.equal(await gw2.stop(), 0, 'the gateway stops cleanly (the queued spans are given up)');
});
