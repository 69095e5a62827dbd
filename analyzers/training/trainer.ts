import { createWorkerClient } from '../../core/index.js';
import type { CacheHeadJob, TrainedCache } from './cache-head.js';
import type { HeadJob, TrainedHead } from './head.js';

/** Trains heads (specialization) and learned caches on a worker thread of its own, one job after another. */
export interface HeadTrainer {
  /** Takes ownership of the job's buffers (they move to the worker). */
  train(job: HeadJob): Promise<TrainedHead>;
  /** Takes ownership of the job's buffers (they move to the worker). */
  trainCache(job: CacheHeadJob): Promise<TrainedCache>;
  close(): Promise<void>;
}

export type TrainingRequest = { kind: 'head'; job: HeadJob } | { kind: 'cache'; job: CacheHeadJob };

const buffers = (arrays: readonly (ArrayBufferView | undefined)[]): ArrayBuffer[] => arrays.flatMap((a) => (a ? [a.buffer as ArrayBuffer] : []));

/** What a request's job or a reply's result moves to the other thread instead of copying. */
export function transfers(of: HeadJob | CacheHeadJob | TrainedHead | TrainedCache): ArrayBuffer[] {
  if ('targets' in of) return buffers([of.hidden, of.features, of.targets, of.evaluate, ...Object.values(of.init ?? {})]);
  if ('labels' in of) return buffers([of.features, of.labels, of.evaluate]);
  if ('bias' in of) return buffers([of.weights, of.bias, of.predictions, of.probabilities]);
  return buffers([...Object.values(of.weights), of.evaluation?.predicted, of.evaluation?.hit]);
}

export function createHeadTrainer(): HeadTrainer {
  const thread = createWorkerClient<TrainingRequest>(import.meta.url, 'worker', 'training');
  // One job in the thread at a time: jobs would share its WebAssembly heap, and a job that
  // exhausts it ends the thread under any other.
  let queue: Promise<unknown> = Promise.resolve();
  const submit = <T>(request: TrainingRequest): Promise<T> => {
    const job = queue.then(async () => thread.request<T>(request, transfers(request.job)));
    queue = job.catch(() => undefined);
    return job;
  };
  return {
    train: async (job) => submit<TrainedHead>({ kind: 'head', job }),
    trainCache: async (job) => submit<TrainedCache>({ kind: 'cache', job }),
    close: async () => thread.close(),
  };
}
