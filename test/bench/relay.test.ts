/**
 * The `relay` target of `overhead` (the bare uWS + undici floor its figures are compared with) must relay
 * faithfully, or its requests/s would mean nothing: JSON and SSE answers through it equal the upstream's.
 */
import t from 'tap';
import { Agent, request } from 'undici';
import { BENCH_CLI } from '../helpers/bench.js';
import { startProcess } from '../../native-bench/common.js';
import { onFreePorts } from '../e2e/support.js';
import { requestBody } from '../../native-bench/overhead.js';

t.test('relay passes JSON and SSE answers through unchanged', async (t) => {
  const run = (args: string[], ready: RegExp, name: string) => startProcess(process.execPath, [BENCH_CLI, ...args], { readyPattern: ready, name });
  // each on a free port (another if a parallel test takes it meanwhile: the error says "cannot listen")
  const up = await onFreePorts(1, async (port) => ({ port, proc: await run(['upstream', '--port', String(port)], /^upstream listening/, 'upstream') }));
  t.teardown(() => up.proc.stop());
  const relay = await onFreePorts(1, async (port) => ({
    port,
    proc: await run(['relay', '--port', String(port), '--upstream', `http://127.0.0.1:${up.port}`], /^relay listening/, 'relay'),
  }));
  t.teardown(() => relay.proc.stop());
  const agent = new Agent();
  t.teardown(() => agent.close());
  const get = async (p: number, mode: 'json' | 'sse') => {
    const r = await request(`http://127.0.0.1:${p}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: requestBody(mode), dispatcher: agent });
    return { status: r.statusCode, type: r.headers['content-type'], text: await r.body.text() };
  };
  for (const mode of ['json', 'sse'] as const) {
    const direct = await get(up.port, mode);
    const relayed = await get(relay.port, mode);
    t.equal(relayed.status, 200, `${mode}: 200`);
    t.equal(relayed.type, direct.type, `${mode}: content type`);
    t.ok(direct.text.length > 500, `${mode}: a real answer (${direct.text.length} bytes)`);
    t.equal(relayed.text, direct.text, `${mode}: same bytes`);
  }
});
