import { parentPort } from 'node:worker_threads';
import { describeError } from '../../core/index.js';
import { trainHead, type HeadJob } from './head.js';

/** The training thread: one job at a time, so the thread that serves models never waits on training. */
parentPort?.on('message', (message: { id: number; job: HeadJob }) => {
  trainHead(message.job).then(
    (head) => parentPort?.postMessage({ id: message.id, head }, [head.weights.buffer as ArrayBuffer, head.bias.buffer as ArrayBuffer, ...(head.predictions ? [head.predictions.buffer as ArrayBuffer] : [])]),
    (err: unknown) => parentPort?.postMessage({ id: message.id, error: describeError(err) }),
  );
});
