// `infergate serve --workers 2`, a real process with its two real workers, in front of real mock vLLM
// servers, reached by real clients (undici, one new connection per request): the kernel spreads the
// connections over both workers (the access log's worker field says which served); a conversation whose
// turns reach different workers keeps landing on one mock (the learned picks go over IPC through the
// parent: no Redis), and so does a stored Responses API answer's retrieve and follow-up; the parent's admin port sums the workers' metrics; a killed worker is restarted; a
// port another process holds, and a worker that cannot start, fail the start once; SIGTERM drains and
// exits 0; restarted workers that keep failing stop the whole process.
import t from 'tap';
import { createServer, type Server } from 'node:net';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'undici';
import { stringify } from 'yaml';
import { runCli, gatewayConfig, tempDir, until, type Proc } from '../helpers/process.js';
import { startMocks, longText, scrape, metric, mockMetric } from '../e2e/support.js';

const mocks = await startMocks(3, ['--model', 'test-model', '--time-scale', '20', '--seed', '5']);
t.teardown(() => mocks.kill());
// a mock in real time, whose streams last seconds: the drain test's request is still running at SIGTERM
const slow = await startMocks(1, ['--model', 'slow-model', '--seed', '6']);
t.teardown(() => slow.kill());

interface Workers {
  url: string;
  adminUrl: string;
  proc: Proc;
  file: string;
}

function writeConfig(config: unknown): string {
  const file = join(tempDir(), 'gateway.yaml');
  writeFileSync(file, stringify(config));
  return file;
}

async function startWorkers(config: unknown, count = 2): Promise<Workers> {
  const file = writeConfig(config);
  const proc = runCli(['serve', '--config', file, '--workers', String(count)]);
  try {
    const [, url] = await proc.waitFor(/^listening on (\S+)$/m, 60_000);
    const [, adminUrl] = await proc.waitFor(/^admin listening on (\S+)$/m);
    return { url, adminUrl, proc, file };
  } catch (e) {
    await proc.kill();
    throw e;
  }
}

const base = gatewayConfig(mocks.endpoints, {
  pool: { policy: 'scored' },
  // no file watch: the reload below comes from SIGHUP alone
  over: { logging: { level: 'info', access_log: true }, admin: { host: '127.0.0.1', port: 0, watch_config: false } },
});
const config = {
  ...base,
  models: [...base.models, { name: 'slow-model', pool: 'slow' }],
  pools: { ...base.pools, slow: { endpoints: slow.endpoints, policy: 'round_robin', metrics: { interval: '100ms', stale_after: '1s' } } },
};
const gw = await startWorkers(config);
t.teardown(() => gw.proc.kill());

interface Answer {
  status: number;
  requestId: string;
  endpoint: string;
  body: string;
}

/** One request on a connection of its own (so the kernel picks a worker for it). */
async function once(path: string, body?: unknown): Promise<Answer> {
  const client = new Client(gw.url);
  try {
    const r = await client.request({
      path,
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    return {
      status: r.statusCode,
      requestId: String(r.headers['x-request-id'] ?? ''),
      endpoint: String(r.headers['x-infergate-endpoint'] ?? ''),
      body: await r.body.text(),
    };
  } finally {
    await client.close();
  }
}

/** The worker whose access line carries this request id (waits for the line: logs come through a pipe). */
async function workerOf(requestId: string): Promise<number> {
  const re = new RegExp(`^\\{[^\\n]*"worker":(\\d+)[^\\n]*"req_id":"${requestId}"`, 'm');
  const m = await until(() => re.exec(gw.proc.stdout()), 5_000, `the access line of ${requestId}`);
  return Number(m[1]);
}

const adminMetric = async (name: string, labels: Record<string, string> = {}) => metric(await scrape(gw.adminUrl), name, labels);

type Msg = { role: string; content: string };
async function turn(history: Msg[], question: string): Promise<{ endpoint: string; worker: number }> {
  history.push({ role: 'user', content: question });
  const r = await once('/v1/chat/completions', { model: 'test-model', max_tokens: 8, messages: history });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${r.body}`);
  history.push({ role: 'assistant', content: (JSON.parse(r.body) as { choices: Array<{ message: { content: string } }> }).choices[0].message.content });
  return { endpoint: r.endpoint, worker: await workerOf(r.requestId) };
}

/** Every learned pick a worker sent has been applied by the other (two workers: one receiver each). */
async function picksDelivered(): Promise<void> {
  await until(
    async () => {
      const s = await scrape(gw.adminUrl);
      const sent = metric(s, 'infergate_cluster_messages_total', { direction: 'sent', result: 'ok' });
      return sent > 0 && metric(s, 'infergate_cluster_messages_total', { direction: 'received', result: 'ok' }) === sent;
    },
    10_000,
    'every learned pick received by the other worker',
  );
}

t.test('one port, both workers serve it', async (t) => {
  const seen = new Set<number>();
  let sent = 0;
  await until(
    async () => {
      const r = await once('/v1/chat/completions', { model: 'test-model', max_tokens: 2, messages: [{ role: 'user', content: `hello ${sent}` }] });
      t.equal(r.status, 200, 'answered');
      sent++;
      seen.add(await workerOf(r.requestId));
      return seen.size === 2;
    },
    30_000,
    'requests on new connections served by worker 1 and worker 2',
  );
  t.same([...seen].sort(), [1, 2], `${sent} connections reached both workers`);
  const workers = (await (await fetch(`${gw.adminUrl}/debug/workers`)).json()) as { workers: Array<{ worker: number; state: string; pid: number }> };
  t.same(workers.workers.map((w) => [w.worker, w.state]), [[1, 'ready'], [2, 'ready']], '/debug/workers lists both, ready');
});

t.test("the parent's admin port: metrics summed over the workers, health from their states", async (t) => {
  const before = await adminMetric('infergate_requests_total', { code: '200' });
  const served = [0, 0];
  for (let i = 0; i < 12; i++) {
    const r = await once('/v1/chat/completions', { model: 'test-model', max_tokens: 2, messages: [{ role: 'user', content: `count me ${i}` }] });
    t.equal(r.status, 200);
    served[(await workerOf(r.requestId)) - 1]++;
  }
  t.equal(await adminMetric('infergate_requests_total', { code: '200' }), before + 12, `the 12 requests counted once each (worker 1: ${served[0]}, worker 2: ${served[1]})`);
  t.equal(await adminMetric('infergate_workers', { state: 'ready' }), 2, 'infergate_workers{state="ready"} 2');
  t.equal(await adminMetric('infergate_build_info'), 1, 'a gauge that is not a count is not summed (build_info 1)');
  t.equal(await adminMetric('infergate_ready'), 1, 'infergate_ready 1');
  const ready = await fetch(`${gw.adminUrl}/readyz`);
  t.equal(ready.status, 200, '/readyz 200');
  t.same(((await ready.json()) as { workers: Array<{ worker: number }> }).workers.map((w) => w.worker), [1, 2], '/readyz asked both');
  t.equal((await fetch(`${gw.adminUrl}/healthz`)).status, 200, '/healthz 200');
  for (const k of ['1', '2']) {
    const r = await fetch(`${gw.adminUrl}/debug/pools?worker=${k}`);
    t.equal(r.status, 200);
    t.equal(r.headers.get('x-infergate-worker'), k, `/debug/pools?worker=${k} is worker ${k}'s`);
    t.ok(((await r.json()) as Record<string, unknown>).p, 'with its pool');
  }
  t.equal((await fetch(`${gw.adminUrl}/debug/pools?worker=9`)).status, 404, 'an unknown worker: 404');
  t.equal((await fetch(`${gw.adminUrl}/metrics`, { method: 'POST' })).status, 405, 'POST on the admin port: 405');
});

t.test("the parent's admin port answers odd requests as a single process's does", async (t) => {
  const admin = new Client(gw.adminUrl);
  t.teardown(() => admin.close());
  // undici's Client sends the path as given (fetch would resolve dot segments before sending)
  const ask = async (method: 'GET' | 'POST' | 'OPTIONS' | 'DELETE', path: string, headers: Record<string, string> = {}) => {
    const r = await admin.request({ method, path, headers });
    const body = await r.body.text();
    return { status: r.statusCode, allow: r.headers.allow, body };
  };
  t.match(await ask('OPTIONS', '/metrics'), { status: 204, allow: 'GET, HEAD, OPTIONS' }, 'OPTIONS on a path of its own: 204 with Allow');
  t.match(await ask('OPTIONS', '/debug/pools'), { status: 204, allow: 'GET, HEAD, OPTIONS' }, "OPTIONS on a worker's path: 204 with Allow");
  t.match(await ask('DELETE', '/healthz'), { status: 405, allow: 'GET, HEAD, OPTIONS' }, 'another method on a known path: 405 with Allow');
  for (const path of ['/nope', '/v1/chat/completions']) {
    t.match(await ask('POST', path), { status: 404, body: /"code":"not_found"/ }, `POST ${path}: 404, whatever the method`);
  }
  for (const path of ['/debug/../metrics', '/%2e%2e/metrics', '/debug/pools/../../metrics']) {
    t.match(await ask('GET', path), { status: 404, body: /"code":"not_found"/ }, `GET ${path}: 404, dot segments not resolved`);
  }
  const big = await ask('GET', '/healthz', { 'x-big': 'a'.repeat(40_000) });
  t.match(big, { status: 431, body: /"code":"headers_too_large"/ }, 'a head over max_header_bytes: 431 with an OpenAI-style body');
});

t.test('without Redis, a conversation whose turns reach different workers stays on its mock', async (t) => {
  const crossed: number[] = [];
  const hitsBefore = await Promise.all(mocks.endpoints.map((e) => mockMetric(e, 'vllm:prefix_cache_hits_total')));
  let turns = 0;
  for (let c = 0; c < 6; c++) {
    const history: Msg[] = [{ role: 'system', content: longText(`workers-${c}`, 4000) }];
    const first = await turn(history, 'First question: what is this about?');
    const workers = new Set([first.worker]);
    for (let k = 2; k <= 4; k++) {
      await picksDelivered();
      const next = await turn(history, `Question ${k}.`);
      turns++;
      workers.add(next.worker);
      t.equal(next.endpoint, first.endpoint, `conversation ${c}, turn ${k} (worker ${next.worker}) on ${first.endpoint}`);
    }
    if (workers.size === 2) crossed.push(c);
  }
  // with two workers and four turns each on new connections, nearly every conversation crosses over
  t.ok(crossed.length >= 1, `conversations ${crossed.join(', ')} had turns on both workers`);
  const hitsAfter = await Promise.all(mocks.endpoints.map((e) => mockMetric(e, 'vllm:prefix_cache_hits_total')));
  const gained = hitsAfter.reduce((s, h, i) => s + h - hitsBefore[i], 0);
  t.ok(gained >= turns * 500, `the later turns found their prefixes cached (${gained} tokens of prefix-cache hits)`);
  t.ok((await adminMetric('infergate_worker_relayed_total', { result: 'ok' })) > 0, 'the parent relayed the picks');
});

t.test('a stored Responses API answer made on one worker is retrieved and followed up from either', async (t) => {
  const made = await once('/v1/responses', { model: 'test-model', input: 'keep this answer', max_output_tokens: 4 });
  t.equal(made.status, 200, made.body);
  const id = (JSON.parse(made.body) as { id: string }).id;
  const maker = await workerOf(made.requestId);
  await picksDelivered(); // the answer's id went to the other worker with the turn's batch
  const served = new Set<number>();
  let tries = 0;
  await until(
    async () => {
      tries++;
      const r = await once(`/v1/responses/${id}`);
      t.equal(r.status, 200, `retrieve ${tries}: ${r.body.slice(0, 120)}`);
      t.equal(r.endpoint, made.endpoint, 'from the server that stored it');
      served.add(await workerOf(r.requestId));
      return served.size === 2;
    },
    30_000,
    'retrieves served by both workers',
  );
  t.pass(`made on worker ${maker}; ${tries} retrieves on new connections, served by workers ${[...served].sort().join(' and ')}`);
  t.equal(await adminMetric('infergate_response_affinity_entries'), 1, "the parent shows the workers' map (the largest, not their sum): one answer");
  const followed = new Set<number>();
  await until(
    async () => {
      const r = await once('/v1/responses', { model: 'test-model', input: 'and then?', previous_response_id: id, max_output_tokens: 4 });
      t.equal(r.status, 200, r.body.slice(0, 120));
      t.equal(r.endpoint, made.endpoint, 'a follow-up lands on the server that keeps the answer');
      followed.add(await workerOf(r.requestId));
      await picksDelivered();
      return followed.size === 2;
    },
    30_000,
    'follow-ups through both workers',
  );
});

t.test('a killed worker is restarted, and the port keeps serving', async (t) => {
  type List = { workers: Array<{ worker: number; pid: number; state: string }>; restarts: number };
  const list = async () => (await (await fetch(`${gw.adminUrl}/debug/workers`)).json()) as List;
  const old = (await list()).workers.find((w) => w.worker === 1)!;
  process.kill(old.pid, 'SIGKILL');
  await gw.proc.waitFor(/"msg":"worker 1 exited \(signal SIGKILL\); restarting it in \d+ ms"/, 10_000);
  const now = await until(
    async () => {
      const l = await list();
      const w = l.workers.find((x) => x.worker === 1);
      return w && w.pid !== old.pid && w.state === 'ready' ? l : undefined;
    },
    30_000,
    'worker 1 ready again with a new pid',
  );
  t.equal(now.restarts, 1, 'one restart in /debug/workers');
  t.equal(await adminMetric('infergate_worker_restarts_total'), 1, 'infergate_worker_restarts_total 1');
  const seen = new Set<number>();
  await until(
    async () => {
      const r = await once('/v1/chat/completions', { model: 'test-model', max_tokens: 2, messages: [{ role: 'user', content: 'after the restart' }] });
      if (r.status !== 200) throw new Error(`status ${r.status}`);
      seen.add(await workerOf(r.requestId));
      return seen.has(1);
    },
    30_000,
    'the restarted worker 1 serving',
  );
  t.pass('the restarted worker serves');
});

t.test('SIGHUP to the parent: every worker reloads the file', async (t) => {
  const withAlias = { ...config, models: [...config.models, { name: 'renamed', targets: [{ model: 'test-model', weight: 1 }] }] };
  writeFileSync(gw.file, stringify(withAlias));
  gw.proc.child.kill('SIGHUP');
  for (const k of [1, 2]) {
    await gw.proc.waitFor(new RegExp(`"worker":${k},[^\\n]*"msg":"config reloaded \\(SIGHUP\\)"`), 15_000);
    t.pass(`worker ${k} reloaded`);
  }
  // both workers know the new alias: requests on new connections (either worker) are served
  const seen = new Set<number>();
  await until(
    async () => {
      const r = await once('/v1/chat/completions', { model: 'renamed', max_tokens: 2, messages: [{ role: 'user', content: 'through the new alias' }] });
      if (r.status !== 200) throw new Error(`status ${r.status}: ${r.body}`);
      seen.add(await workerOf(r.requestId));
      return seen.size === 2;
    },
    30_000,
    'the new alias served by both workers',
  );
  t.pass('the new alias is served by worker 1 and worker 2');
});

t.test('SIGTERM: a streaming request in flight finishes, every worker drains, exit 0', async (t) => {
  const client = new Client(gw.url);
  t.teardown(() => client.close());
  const r = await client.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow-model', stream: true, max_tokens: 300, messages: [{ role: 'user', content: 'a long answer please' }] }),
  });
  t.equal(r.statusCode, 200);
  let text = '';
  const chunks = r.body[Symbol.asyncIterator]();
  const first = await chunks.next();
  text += Buffer.from(first.value as Buffer).toString();
  await until(async () => (await adminMetric('infergate_pool_in_flight', { pool: 'slow' })) === 1, 5_000, 'the stream in flight, as the summed metrics say');
  gw.proc.child.kill('SIGTERM');
  for (;;) {
    const c = await chunks.next();
    if (c.done) break;
    text += Buffer.from(c.value as Buffer).toString();
  }
  t.match(text, /data: \[DONE\]\n\n$/, 'the stream in flight ended with [DONE]');
  t.notMatch(text, /"error"/, 'without an error event');
  t.equal(await gw.proc.exited(30_000), 0, 'the parent exited 0');
  t.match(gw.proc.stdout(), /"worker":\d,[^\n]*"in_flight":1,[^\n]*"msg":"draining in-flight requests"/, 'its worker waited for it');
  t.match(gw.proc.stdout(), /"worker":1,[^\n]*"msg":"shutting down"/, 'worker 1 drained');
  t.match(gw.proc.stdout(), /"worker":2,[^\n]*"msg":"shutting down"/, 'worker 2 drained');
});

t.test('a port another process holds: the start fails, saying so', async (t) => {
  const holder: Server = createServer();
  await new Promise<void>((res) => holder.listen(0, '127.0.0.1', res));
  t.teardown(() => holder.close());
  const port = (holder.address() as { port: number }).port;
  const proc = runCli(['serve', '--config', writeConfig({ ...config, listen: { host: '127.0.0.1', port } }), '--workers', '2']);
  t.teardown(() => proc.kill());
  t.equal(await proc.exited(30_000), 1, 'exit 1');
  t.match(proc.stderr(), `cannot listen on 127.0.0.1:${port}: another process holds it`, 'the message names the port and why');
  t.notMatch(proc.stdout(), /listening on/, 'nothing listened');
});

t.test('a worker that cannot start fails the start once, with its error', async (t) => {
  const bad = { ...config, pools: { ...config.pools, p: { ...config.pools.p, api_key_env: 'INFERGATE_TEST_UNSET_KEY' } } };
  const env = { ...process.env };
  delete env.INFERGATE_TEST_UNSET_KEY;
  const proc = runCli(['serve', '--config', writeConfig(bad), '--workers', '2'], env);
  t.teardown(() => proc.kill());
  t.equal(await proc.exited(30_000), 1, 'exit 1');
  const errors = proc.stderr().match(/INFERGATE_TEST_UNSET_KEY/g) ?? [];
  t.equal(errors.length, 1, `the worker's error once: ${proc.stderr().trim()}`);
  t.match(proc.stderr(), /worker 1 exited \(code 1\) before it listened; not starting the others/);
  t.notMatch(proc.stdout(), /worker":2/, 'worker 2 never started');
});

t.test('--workers refuses what is not a count', async (t) => {
  for (const v of ['0', 'two', '-1', '1000']) {
    const r = runCli(['serve', '--config', writeConfig(config), `--workers=${v}`]);
    t.equal(await r.exited(30_000), 2, `--workers ${v}: exit 2`);
    t.match(r.stderr(), /--workers must be a number from 1 to 256 or "auto"/);
  }
});

t.test('restarted workers that keep failing to start stop the whole process, exit 1', async (t) => {
  const dir = tempDir();
  const keyFile = join(dir, 'upstream.key');
  writeFileSync(keyFile, 'sk-test\n');
  const keyed = { ...config, pools: { ...config.pools, p: { ...config.pools.p, api_key_file: keyFile } } };
  const g = await startWorkers(keyed);
  t.teardown(() => g.proc.kill());
  // from now on a new worker cannot start: check-config refuses the config (its key file is gone)
  rmSync(keyFile);
  const list = (await (await fetch(`${g.adminUrl}/debug/workers`)).json()) as { workers: Array<{ worker: number; pid: number }> };
  process.kill(list.workers[1].pid, 'SIGKILL');
  t.equal(await g.proc.exited(60_000), 1, 'the parent exited 1');
  t.match(g.proc.stdout(), /"msg":"workers died before they listened 5 times in a row: stopping"/, 'saying why');
  t.match(g.proc.stdout(), /"worker":1,[^\n]*"msg":"shutting down"/, 'the worker still serving was drained');
});
