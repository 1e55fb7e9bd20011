/**
 * Shared pieces of the end-to-end tests: real `infergate mock` processes, a real gateway, and clients that
 * speak HTTP over sockets. Run directly (as tap does with every file here), it checks its own parsers.
 */
import { createServer } from 'node:net';
import { pathToFileURL } from 'node:url';
import { runCli, startGateway, gatewayConfig, until, type Proc, type RunningGateway } from '../helpers/process.js';

export { runCli, startGateway, gatewayConfig, until };
export type { Proc, RunningGateway };

/**
 * The `todo` option of a test that shows a product bug: the reason, so tap skips it; with E2E_RUN_TODO=1
 * false, so the test runs and fails for as long as the bug is there.
 */
export function todo(reason: string): string | false {
  return process.env.E2E_RUN_TODO ? false : reason;
}

export interface Mocks {
  proc: Proc;
  endpoints: string[];
  kill(): Promise<number | null>;
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

/**
 * K consecutive free ports below Linux's ephemeral range (32768+), where outgoing connections (many, in
 * these tests) cannot take one between the check and the mock's listen.
 */
export async function freePorts(count: number): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    const ok = await Promise.all(Array.from({ length: count }, (_, i) => portFree(base + i)));
    if (ok.every(Boolean)) return base;
  }
}

/**
 * Runs `start` on `count` consecutive free ports. When a parallel test takes one of them between the check
 * and the listen (the error says "cannot listen": listeners never share a port), it tries other ports.
 */
export async function onFreePorts<T>(count: number, start: (base: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePorts(count));
    } catch (e) {
      if (attempt < 5 && /cannot listen/.test((e as Error).message)) continue;
      throw e;
    }
  }
}

/** `infergate mock --port N --count K …`: K servers on consecutive ports; waits for every "listening" line. */
export function startMocks(count: number, args: string[]): Promise<Mocks> {
  const re = new RegExp(`(?:^mock listening on http://(\\S+)\\n[^]*){${count}}`, 'm');
  return onFreePorts(count, async (base) => {
    const proc = runCli(['mock', '--port', String(base), '--count', String(count), ...args]);
    try {
      await proc.waitFor(re, 60_000);
    } catch (e) {
      await proc.kill();
      throw e;
    }
    const endpoints = [...proc.stdout().matchAll(/^mock listening on http:\/\/(\S+)$/gm)].map((m) => m[1]);
    return { proc, endpoints, kill: () => proc.kill() };
  });
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text → samples (comments skipped; label values unescaped). */
export function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  const re = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = re.exec(line);
    if (!m) throw new Error(`bad metrics line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const v = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]);
    out.push({ name: m[1], labels, value: v });
  }
  return out;
}

/** Sum of every sample named `name` whose labels include `match`. */
export function metric(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

export async function scrape(baseUrl: string): Promise<Sample[]> {
  const r = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(3_000) });
  if (!r.ok) throw new Error(`${baseUrl}/metrics: ${r.status}`);
  return parseProm(await r.text());
}

export async function mockMetric(endpoint: string, name: string, match: Record<string, string> = {}): Promise<number> {
  return metric(await scrape(`http://${endpoint}`), name, match);
}

export interface DebugEndpoint {
  endpoint: string;
  signals: { loraRunning: string[]; loraWaiting: string[]; running: number; waiting: number } | null;
  age_ms: number | null;
  stale: boolean;
  scrape_failures: number;
  in_flight: number;
  pending: number;
  eligible: boolean;
  why_not?: string;
  index_blocks: number;
}

export interface DebugPool {
  policy: string;
  index: { blocks: number; nodes: number; approxBytes: number };
  endpoints: DebugEndpoint[];
}

export async function debugPools(gw: RunningGateway): Promise<Record<string, DebugPool>> {
  const r = await fetch(`${gw.adminUrl}/debug/pools`, { signal: AbortSignal.timeout(3_000) });
  return (await r.json()) as Record<string, DebugPool>;
}

/** Deterministic filler text of about `chars` characters (distinct per `seed`). */
export function longText(seed: string, chars: number): string {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet', 'kilo', 'lima'];
  let s = `Instructions ${seed}. `;
  let x = 0;
  for (const c of seed) x = (x * 31 + c.charCodeAt(0)) >>> 0;
  while (s.length < chars) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    s += words[(x >>> 16) % words.length] + (x % 7 === 0 ? '. ' : ' ');
  }
  return s.slice(0, chars);
}

export interface ChatResult {
  status: number;
  endpoint: string | null;
  headers: Headers;
  body: string;
  /** streaming: the answer ended with data: [DONE]; not streaming: a JSON completion arrived */
  complete: boolean;
  error?: unknown;
}

/** POST /v1/chat/completions through `baseUrl`, reading the whole answer. */
export async function chat(baseUrl: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<ChatResult> {
  try {
    const r = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: signal ?? AbortSignal.timeout(30_000),
    });
    const text = await r.text();
    let complete = false;
    if (r.status === 200) {
      if (body.stream) complete = /data: \[DONE\]\n\n$/.test(text) && !text.includes('"error"');
      else complete = (JSON.parse(text) as { object?: string }).object === 'chat.completion';
    }
    return { status: r.status, endpoint: r.headers.get('x-infergate-endpoint'), headers: r.headers, body: text, complete };
  } catch (error) {
    return { status: 0, endpoint: null, headers: new Headers(), body: '', complete: false, error };
  }
}

export function countBy<T>(xs: T[]): Map<T, number> {
  const m = new Map<T, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
}

// Self-check when tap runs this file on its own.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { default: t } = await import('tap');
  t.test('parseProm and metric read vLLM-style and prom-client text', async (t) => {
    const s = parseProm(
      '# HELP x y\n# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{model_name="m",engine="0"} 12.0\n' +
        'vllm:lora_requests_info{max_lora="1",running_lora_adapters="a",waiting_lora_adapters=""} 1.7e+09\n' +
        'infergate_rejected_total{reason="saturated"} 3\ninfergate_rejected_total{reason="invalid"} 1\nh_bucket{le="+Inf"} 2\n',
    );
    t.equal(metric(s, 'vllm:prefix_cache_hits_total'), 12);
    t.equal(metric(s, 'infergate_rejected_total'), 4);
    t.equal(metric(s, 'infergate_rejected_total', { reason: 'saturated' }), 3);
    t.equal(s.find((x) => x.name === 'vllm:lora_requests_info')?.labels.running_lora_adapters, 'a');
    t.throws(() => parseProm('not a metric line at all\n'));
  });
  t.test('longText is deterministic and distinct per seed', async (t) => {
    t.equal(longText('a', 4000), longText('a', 4000));
    t.equal(longText('a', 4000).length, 4000);
    t.not(longText('a', 4000), longText('b', 4000));
  });
}
