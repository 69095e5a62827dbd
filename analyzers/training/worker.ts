import { parentPort } from 'node:worker_threads';
import { describeError } from '../../core/index.js';
import { trainCacheHead } from './cache-head.js';
import { trainHead } from './head.js';
import { transfers, type TrainingReply, type TrainingRequest } from './trainer.js';

/** The training thread: one job at a time, so the thread that serves models never waits on training. */
parentPort?.on('message', (request: TrainingRequest) => {
  const training = request.kind === 'cache' ? trainCacheHead(request.job) : trainHead(request.job);
  training.then(
    (trained) => parentPort?.postMessage({ id: request.id, trained } satisfies TrainingReply, transfers(trained)),
    (err: unknown) => parentPort?.postMessage({ id: request.id, error: describeError(err) } satisfies TrainingReply),
  );
});
