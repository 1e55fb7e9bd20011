/**
 * What the parent of `serve --workers N` (workers.ts) and its workers (run.ts) say to each other over the
 * IPC channel (serialization "advanced"), besides the learned picks of src/cluster/ipc.ts.
 */
import { availableParallelism } from 'node:os';

/** The environment a worker is started with (cli.ts reads it: with an IPC channel, `serve` runs as a worker). */
export const WORKER_ID_ENV = 'INFERGATE_WORKER_ID';
export const WORKER_PORT_ENV = 'INFERGATE_WORKER_PORT';

/** `--workers` as given: a count from 1 to 256, or `auto` (the CPUs this process may use). */
export function parseWorkers(value: string): number {
  if (value === 'auto') return availableParallelism();
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 256) throw new Error(`--workers must be a number from 1 to 256 or "auto", not "${value}"`);
  return Number(value);
}

/** A worker's id and client port from its environment, when this process was forked as one. */
export function workerRoleFromEnv(env: NodeJS.ProcessEnv = process.env): { id: number; port: number } | undefined {
  if (process.send === undefined) return undefined;
  const id = Number(env[WORKER_ID_ENV]);
  const port = Number(env[WORKER_PORT_ENV]);
  if (!Number.isInteger(id) || id < 1 || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { id, port };
}

export type WorkerMessage =
  /** worker → parent: listening; its private admin listener's address */
  | { t: 'ready'; url: string; adminUrl: string }
  /** worker → parent: its metric registry, as prom-client's getMetricsAsJSON, in JSON */
  | { t: 'metrics'; id: number; json: string };

/** parent → worker: send your metrics, tagged `id` */
export interface MetricsRequest {
  t: 'metrics?';
  id: number;
}

export function isMetricsRequest(m: unknown): m is MetricsRequest {
  return typeof m === 'object' && m !== null && (m as { t?: unknown }).t === 'metrics?' && typeof (m as { id?: unknown }).id === 'number';
}

export function isWorkerMessage(m: unknown): m is WorkerMessage {
  if (typeof m !== 'object' || m === null) return false;
  const x = m as Record<string, unknown>;
  if (x.t === 'ready') return typeof x.url === 'string' && typeof x.adminUrl === 'string';
  if (x.t === 'metrics') return typeof x.id === 'number' && typeof x.json === 'string';
  return false;
}
