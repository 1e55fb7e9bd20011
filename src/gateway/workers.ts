/**
 * `infergate serve --workers N` (N > 1): this process is the parent of N worker processes, each a whole
 * gateway (run.ts) on one client port.
 *
 * - The port: the parent first binds it itself, without SO_REUSEPORT (node:net), so a port any other
 *   process holds fails the start with a clear message; port 0 gets its number there. It then lets go and
 *   the workers listen on it with SO_REUSEPORT (Front joinShared); the kernel spreads new connections over
 *   them. Only processes of the same user can join a SO_REUSEPORT group, and a later listener without it
 *   (every other infergate, nginx, …) is refused while the workers hold it.
 * - Start: worker 1 first; a worker that exits before it listens (a key file that cannot be read, the port
 *   taken meanwhile) fails the start once, with its own error on stderr, and the parent exits 1.
 *   Then the others, together. "listening on URL" and "admin listening on URL" are printed when all listen.
 * - Routing knowledge: without a `cluster` backend the workers share learned picks over IPC (src/cluster/
 *   ipc.ts); the parent relays each worker's batch to the others. With `cluster.backend: redis` every
 *   worker is a replica on Redis like any other.
 * - Admin: one endpoint on admin.host:admin.port, served by the parent (node:http: a few requests a
 *   minute, no client traffic): /metrics sums the workers' registries (prom-client's AggregatorRegistry;
 *   a gauge that is not a count is the workers' min or max, see GAUGE_AGGREGATION) and adds the parent's
 *   own; /healthz, /readyz from the workers' states; /debug/workers lists them; every other GET (the status
 *   page, /debug/*) is proxied to one worker, `?worker=K` (default: the first serving one), with the
 *   answer's `x-infergate-worker` header saying which. Each worker's own admin listener is private, on
 *   127.0.0.1 on a port of the kernel's choosing.
 * - Signals: SIGTERM/SIGINT are passed to every worker, which drains as one gateway does; the parent exits 0
 *   when all exited 0. SIGHUP is passed on: each worker reloads its config file.
 * - A worker that dies is restarted after a backoff (RESTART_MIN_MS doubling to RESTART_MAX_MS; back to the
 *   minimum once a worker has served RESTART_RESET_MS), logged and counted; if restarted workers die before
 *   they listen MAX_START_FAILURES times in a row, the parent stops the others and exits 1.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import * as sea from 'node:sea';
import client from 'prom-client';
import { getGlobalDispatcher, request, type Dispatcher } from 'undici';
import { errorBody, errors, statusLine } from '../openai/errors.js';
import type { Config } from '../config/schema.js';
import { isLearnMessage } from '../cluster/ipc.js';
import { createLogger, effectiveLevel, type Logger } from '../observability/logger.js';
import { isWorkerMessage, WORKER_ID_ENV, WORKER_PORT_ENV, type MetricsRequest } from './worker-protocol.js';

export const RESTART_MIN_MS = 200;
export const RESTART_MAX_MS = 10_000;
export const RESTART_RESET_MS = 30_000;
export const MAX_START_FAILURES = 5;
/** how long /metrics waits for each worker's registry */
const METRICS_TIMEOUT_MS = 3_000;
/** learned-pick batches relayed to one worker and not yet written, at most (past that: dropped, counted) */
const RELAY_OUTSTANDING = 64;


/** How each gateway gauge combines over the workers; gauges not named are counts and are summed. */
const GAUGE_AGGREGATION: Record<string, 'min' | 'max'> = {
  infergate_ready: 'min',
  infergate_model_ready: 'min',
  infergate_cluster_connected: 'min',
  infergate_quota_backend_up: 'min',
  infergate_endpoint_eligible: 'min',
  infergate_pool_eligible_endpoints: 'min',
  infergate_build_info: 'max',
  infergate_auth_disabled: 'max',
  infergate_endpoint_metrics_age_seconds: 'max',
  infergate_endpoint_queue_waiting: 'max',
  infergate_endpoint_running: 'max',
  infergate_endpoint_kv_cache_usage_ratio: 'max',
  infergate_endpoint_stale: 'max',
  infergate_endpoint_ejected: 'max',
  infergate_pool_endpoints: 'max',
  infergate_pool_queue_waiting: 'max',
  infergate_pool_saturated: 'max',
  // every worker holds (nearly) the same ids once they are shared over IPC: not a count to add up
  infergate_response_affinity_entries: 'max',
};

type MetricJson = { name: string; type: string; aggregator?: string };

/** One registry from the workers' (getMetricsAsJSON each): counters and histograms summed, gauges as above. */
export function aggregateMetrics(perWorker: MetricJson[][]): client.Registry {
  for (const metrics of perWorker) {
    for (const m of metrics) {
      const how = GAUGE_AGGREGATION[m.name];
      if (how !== undefined) m.aggregator = how;
    }
  }
  return client.AggregatorRegistry.aggregate(perWorker as Parameters<typeof client.AggregatorRegistry.aggregate>[0]);
}

interface Worker {
  id: number;
  child: ChildProcess;
  state: 'starting' | 'ready' | 'stopping';
  startedAt: number;
  readyAt?: number;
  adminUrl?: string;
  /** relayed batches not yet written to it */
  relaying: number;
}

/** The client port for the workers: bound and let go here, so one another process holds is refused now. */
export function claimPort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createNetServer();
    srv.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'another process holds it (serve --workers shares a port only among its own workers)'
          : err.code === 'EACCES'
            ? 'not permitted'
            : err.message;
      reject(new Error(`cannot listen on ${host}:${port}: ${why}`));
    });
    srv.listen({ host, port, exclusive: true }, () => {
      const bound = (srv.address() as { port: number }).port;
      srv.close(() => resolve(bound));
    });
  });
}

export async function runWorkers(config: Config, file: string, count: number): Promise<number> {
  let logger: Logger;
  try {
    logger = createLogger(effectiveLevel(config.logging.level), config.logging.format).child({ role: 'parent' });
  } catch (err) {
    process.stderr.write(`infergate: ${(err as Error).message}\n`);
    return 1;
  }
  const parent = new Parent(config, file, count, logger);
  return parent.run();
}

class Parent {
  private readonly workers = new Map<number, Worker>();
  private readonly registry = new client.Registry();
  private readonly restarts: client.Counter;
  private readonly relayed: client.Counter<'result'>;
  private port = 0;
  private stopping = false;
  private admin: Server | undefined;
  /** consecutive restarted workers that died before they listened */
  private startFailures = 0;
  private backoff = RESTART_MIN_MS;
  private readonly timers = new Set<NodeJS.Timeout>();
  private metricsRequest = 0;
  private readonly metricsWaiters = new Map<string, (json: string) => void>();
  private finish: ((code: number) => void) | undefined;

  constructor(
    private readonly config: Config,
    private readonly file: string,
    private readonly count: number,
    private readonly logger: Logger,
  ) {
    const registers = [this.registry];
    const workers = this.workers;
    new client.Gauge({
      name: 'infergate_workers',
      help: 'Worker processes of serve --workers N, by state: ready (listening) or starting.',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        let ready = 0;
        for (const w of workers.values()) if (w.state === 'ready') ready++;
        this.set({ state: 'ready' }, ready);
        this.set({ state: 'starting' }, [...workers.values()].filter((w) => w.state === 'starting').length);
      },
    });
    this.restarts = new client.Counter({
      name: 'infergate_worker_restarts_total',
      help: 'Workers of serve --workers N that died and were started again.',
      registers,
    });
    this.relayed = new client.Counter({
      name: 'infergate_worker_relayed_total',
      help: 'Batches of learned picks the parent passed from one worker to another (IPC sharing), by result: ok, dropped (the receiver is behind or gone).',
      labelNames: ['result'],
      registers,
    });
    this.relayed.inc({ result: 'ok' }, 0);
  }

  async run(): Promise<number> {
    const { listen, admin } = this.config;
    try {
      this.port = await claimPort(listen.host, listen.port);
      this.admin = await this.listenAdmin(admin.host, admin.port);
    } catch (err) {
      process.stderr.write(`infergate: ${(err as Error).message}\n`);
      this.admin?.close();
      return 1;
    }
    const done = new Promise<number>((resolve) => (this.finish = resolve));
    const onStop = (sig: NodeJS.Signals) => void this.stop(sig, 0);
    process.once('SIGTERM', onStop);
    process.once('SIGINT', onStop);
    process.on('SIGHUP', () => {
      if (this.stopping) return;
      this.logger.info({ workers: this.workers.size }, 'SIGHUP: every worker reloads its config');
      // a worker still starting reads the file as it is now, and has no SIGHUP handler yet (it would die)
      for (const w of this.workers.values()) if (w.state === 'ready') w.child.kill('SIGHUP');
    });
    // worker 1 alone first: a start that cannot succeed fails once, with that worker's error
    const first = await this.startWorker(1);
    if (this.stopping) return done; // a signal came during the start
    if (first !== 'ready') {
      process.stderr.write(`infergate: worker 1 exited (${first}) before it listened; not starting the others\n`);
      await this.stop(undefined, 1);
      return done;
    }
    const rest = await Promise.all(Array.from({ length: this.count - 1 }, (_, i) => this.startWorker(i + 2)));
    const failed = rest.find((r) => r !== 'ready');
    if (this.stopping) return done;
    if (failed !== undefined) {
      process.stderr.write(`infergate: a worker exited (${failed}) before it listened\n`);
      await this.stop(undefined, 1);
      return done;
    }
    this.started = true;
    if (!this.stopping) {
      const scheme = listen.tls ? 'https' : 'http';
      const addr = this.admin.address() as { port: number };
      process.stdout.write(`listening on ${scheme}://${urlHost(listen.host)}:${this.port}\nadmin listening on http://${urlHost(admin.host)}:${addr.port}\n`);
      this.logger.info({ workers: this.count, port: this.port, pids: [...this.workers.values()].map((w) => w.child.pid) }, `${this.count} workers listening`);
    }
    return done;
  }

  /** Forks worker `id`; resolves 'ready' once it listens, or how it ended if it exited first. */
  private startWorker(id: number): Promise<'ready' | string> {
    return new Promise((resolve) => {
      const args = ['serve', '--config', this.file];
      const options = {
        env: { ...process.env, [WORKER_ID_ENV]: String(id), [WORKER_PORT_ENV]: String(this.port) },
        serialization: 'advanced' as const,
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'] as ['ignore', 'inherit', 'inherit', 'ipc'],
      };
      // The single executable is its own entry point: it is started with the command alone (fork would
      // give it a script path as its first argument, and Node options it does not read).
      const child = sea.isSea() ? spawn(process.execPath, args, options) : fork(process.argv[1], args, { ...options, execArgv: process.execArgv });
      const w: Worker = { id, child, state: 'starting', startedAt: Date.now(), relaying: 0 };
      this.workers.set(id, w);
      let settled = false;
      child.on('message', (m: unknown) => {
        try {
          this.fromWorker(w, m);
        } catch (err) {
          this.logger.error({ err, worker: id }, 'message from a worker failed');
        }
        if (!settled && w.state === 'ready') {
          settled = true;
          resolve('ready');
        }
      });
      // an IPC send to a worker that just died reports here; its exit is handled below
      child.on('error', (err) => this.logger.warn({ err, worker: id }, 'worker process error'));
      child.once('exit', (code, signal) => {
        const how = signal ? `signal ${signal}` : `code ${code}`;
        const wasReady = w.readyAt !== undefined;
        if (this.workers.get(id) === w) this.workers.delete(id);
        if (!settled) {
          settled = true;
          resolve(how);
        }
        this.exited(w, how, code === 0 || signal === 'SIGTERM', wasReady);
      });
    });
  }

  private fromWorker(w: Worker, m: unknown): void {
    if (isLearnMessage(m)) {
      this.relay(w, m);
      return;
    }
    if (!isWorkerMessage(m)) return;
    if (m.t === 'ready') {
      w.adminUrl = m.adminUrl;
      w.readyAt = Date.now();
      this.startFailures = 0;
      if (w.state === 'starting') w.state = 'ready';
    } else {
      this.metricsWaiters.get(`${w.id}:${m.id}`)?.(m.json);
    }
  }

  /** A worker's batch of learned picks, to every other worker (bounded per receiver). */
  private relay(from: Worker, m: unknown): void {
    for (const w of this.workers.values()) {
      if (w === from || !w.child.connected) continue;
      if (w.relaying >= RELAY_OUTSTANDING) {
        this.relayed.inc({ result: 'dropped' });
        continue;
      }
      w.relaying++;
      try {
        w.child.send(m as object, (err) => {
          w.relaying--;
          this.relayed.inc({ result: err ? 'dropped' : 'ok' });
        });
      } catch {
        w.relaying--;
        this.relayed.inc({ result: 'dropped' });
      }
    }
  }

  /** `clean`: it exited 0, or as SIGTERM ends a worker that had not set up its handlers yet */
  private exited(w: Worker, how: string, clean: boolean, wasReady: boolean): void {
    if (this.stopping) {
      if (!clean) this.exitCode = 1;
      this.logger.info({ worker: w.id, pid: w.child.pid, how }, 'worker exited');
      if (this.workers.size === 0) this.allStopped();
      return;
    }
    if (!this.started && !wasReady) return; // a failed start: run() reports it and stops
    if (wasReady) {
      if (Date.now() - (w.readyAt ?? 0) >= RESTART_RESET_MS) this.backoff = RESTART_MIN_MS;
      this.startFailures = 0;
    } else if (++this.startFailures >= MAX_START_FAILURES) {
      this.logger.error({ worker: w.id, how, failures: this.startFailures }, `workers died before they listened ${this.startFailures} times in a row: stopping`);
      void this.stop(undefined, 1);
      return;
    }
    const delay = this.backoff;
    this.backoff = Math.min(this.backoff * 2, RESTART_MAX_MS);
    this.logger.error({ worker: w.id, pid: w.child.pid, how, restart_in_ms: delay }, `worker ${w.id} exited (${how}); restarting it in ${delay} ms`);
    this.restarts.inc();
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.stopping) return;
      void this.startWorker(w.id);
    }, delay);
    this.timers.add(timer);
  }

  private exitCode = 0;
  /** every worker of the first start listened */
  private started = false;

  private allStopped(): void {
    this.admin?.close();
    this.admin?.closeAllConnections();
    this.finish?.(this.exitCode);
  }

  /** Stops every worker (each drains) and resolves run() when all have exited. */
  private async stop(sig: NodeJS.Signals | undefined, code: number): Promise<void> {
    if (code !== 0) this.exitCode = code;
    if (this.stopping) return;
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (sig) this.logger.info({ signal: sig, workers: this.workers.size }, 'shutting down: every worker drains');
    if (this.workers.size === 0) {
      this.allStopped();
      return;
    }
    for (const w of this.workers.values()) {
      w.state = 'stopping';
      w.child.kill('SIGTERM');
    }
    // a worker that outlives its drain by far is killed
    const hard = setTimeout(() => {
      for (const w of this.workers.values()) {
        this.logger.error({ worker: w.id, pid: w.child.pid }, 'worker did not exit after its drain: killing it');
        w.child.kill('SIGKILL');
      }
    }, this.config.limits.drain_timeout + 15_000);
    hard.unref();
  }

  // ---- the aggregating admin endpoint ----

  private listenAdmin(host: string, port: number): Promise<Server> {
    return new Promise((resolve, reject) => {
      const srv = createHttpServer({ maxHeaderSize: this.config.limits.max_header_bytes }, (req, res) => {
        this.adminRequest(req, res).catch((err: unknown) => {
          this.logger.error({ err }, 'admin request failed');
          if (!res.headersSent) adminError(res, 500, 'internal_error', 'The gateway failed to handle this request.');
          else res.destroy();
        });
      });
      // a head over max_header_bytes is answered 431 as a single process's admin port answers it; any other
      // unreadable request only closes the connection. No answer is written while one to an earlier request
      // on the connection has begun (the check Node's own default makes, on its socket's current response)
      srv.on('clientError', (err: NodeJS.ErrnoException, socket) => {
        const current = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
        if (err.code === 'HPE_HEADER_OVERFLOW' && socket.writable && (!current || !current.headersSent)) {
          const e = errors.headersTooLarge(this.config.limits.max_header_bytes);
          const body = errorBody(e);
          socket.end(`HTTP/1.1 ${statusLine(e.status)}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
        } else socket.destroy();
      });
      srv.once('error', (err: NodeJS.ErrnoException) =>
        reject(new Error(`cannot listen on ${host}:${port} (admin): ${err.code === 'EADDRINUSE' ? 'in use' : err.message}`)),
      );
      srv.listen({ host, port, exclusive: true }, () => resolve(srv));
    });
  }

  private ready(): Worker[] {
    return [...this.workers.values()].filter((w) => w.state === 'ready' && w.adminUrl !== undefined).sort((a, b) => a.id - b.id);
  }

  /**
   * The parent answers GET and HEAD on its own paths (the summed metrics, health, readiness, the worker
   * list); every other request goes to one worker as it came (method and raw path), so that the admin port
   * answers as a single process's does: 404 for an unknown path whatever the method, OPTIONS 204 and other
   * methods 405 on a known one, dot segments not resolved.
   */
  private async adminRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    const path = url.split('?')[0];
    if (PARENT_ADMIN_PATHS.has(path) && method !== 'GET' && method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD, OPTIONS');
      if (method === 'OPTIONS') {
        res.statusCode = 204;
        res.end();
      } else adminError(res, 405, 'method_not_allowed', `${method} is not allowed on ${path.slice(0, 200)}.`);
      return;
    }
    if (path === '/metrics') return this.metrics(res);
    if (path === '/healthz') {
      const n = this.ready().length;
      json(res, n > 0 ? 200 : 503, { status: n > 0 ? 'ok' : 'no worker serving', workers: n });
      return;
    }
    if (path === '/readyz') return this.readyz(res);
    if (path === '/debug/workers') {
      json(res, 200, {
        port: this.port,
        workers: [...this.workers.values()]
          .sort((a, b) => a.id - b.id)
          .map((w) => ({ worker: w.id, pid: w.child.pid, state: w.state, started_at: new Date(w.startedAt).toISOString() })),
        restarts: (await this.restarts.get()).values[0]?.value ?? 0,
      });
      return;
    }
    // anything else (the status page, /debug/*): one worker's answer
    const wanted = new URLSearchParams(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '').get('worker');
    const ready = this.ready();
    const w = wanted === null ? ready[0] : ready.find((x) => String(x.id) === wanted);
    if (w === undefined) {
      if (wanted !== null) adminError(res, 404, 'not_found', `No serving worker ${wanted.slice(0, 20)} (see /debug/workers).`);
      else adminError(res, 503, 'no_endpoint', 'No worker is serving now.');
      return;
    }
    if (!url.startsWith('/')) {
      adminError(res, 400, 'invalid_field', 'The request target must be a path.');
      return;
    }
    // the path as it came (a URL string would be normalised: /debug/../metrics would reach /metrics); a request
    // body, which no admin route reads, is not sent on
    const answer = await getGlobalDispatcher().request({ origin: w.adminUrl, path: url, method: method as Dispatcher.HttpMethod, headersTimeout: 5_000, bodyTimeout: 5_000 });
    res.statusCode = answer.statusCode;
    for (const h of ['content-type', 'cache-control', 'allow']) {
      const v = answer.headers[h];
      if (typeof v === 'string') res.setHeader(h, v);
    }
    res.setHeader('x-infergate-worker', String(w.id));
    res.end(Buffer.from(await answer.body.arrayBuffer()));
  }

  private async readyz(res: ServerResponse): Promise<void> {
    if (this.stopping) {
      json(res, 503, { status: 'draining' });
      return;
    }
    const ready = this.ready();
    const each = await Promise.all(
      ready.map(async (w) => {
        try {
          const r = await request(`${w.adminUrl}/readyz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
          return { worker: w.id, status: r.statusCode, answer: (await r.body.json()) as unknown };
        } catch (err) {
          return { worker: w.id, status: 0, answer: { error: (err as Error).message } };
        }
      }),
    );
    const ok = each.length > 0 && each.every((e) => e.status === 200);
    json(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not ready', workers: each });
  }

  private async metrics(res: ServerResponse): Promise<void> {
    const id = ++this.metricsRequest;
    const replies = await Promise.all(
      this.ready().map(
        (w) =>
          new Promise<string | undefined>((resolve) => {
            const key = `${w.id}:${id}`;
            const timer = setTimeout(() => done(undefined), METRICS_TIMEOUT_MS);
            const done = (jsonText: string | undefined) => {
              clearTimeout(timer);
              this.metricsWaiters.delete(key);
              resolve(jsonText);
            };
            this.metricsWaiters.set(key, done);
            const ask: MetricsRequest = { t: 'metrics?', id };
            try {
              w.child.send(ask, (err) => err && done(undefined));
            } catch {
              done(undefined);
            }
          }),
      ),
    );
    const perWorker = replies.filter((r): r is string => r !== undefined).map((r) => JSON.parse(r) as MetricJson[]);
    const merged = client.Registry.merge([aggregateMetrics(perWorker), this.registry]);
    res.statusCode = 200;
    res.setHeader('content-type', merged.contentType);
    res.end(await merged.metrics());
  }
}

/** The admin paths the parent answers itself (GET and HEAD); all others are a worker's. */
const PARENT_ADMIN_PATHS = new Set(['/metrics', '/healthz', '/readyz', '/debug/workers']);

function json(res: ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
}

function adminError(res: ServerResponse, status: number, code: string, message: string): void {
  json(res, status, { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code } });
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
