/** A worker thread of the tuner's pool (tune-pool.ts): runs the tasks it is sent, answers with their figures. */
import { parentPort, workerData } from 'node:worker_threads';
import { LocalRunner, type PoolTask, type RunSetup } from './tune-pool.js';

const runner = new LocalRunner(workerData as RunSetup);
parentPort!.on('message', (m: { id: number; task: PoolTask }) => {
  try {
    parentPort!.postMessage({ id: m.id, result: runner.do(m.task) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: (e as Error).message });
  }
});
