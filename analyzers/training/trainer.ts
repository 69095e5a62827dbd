import type { Worker } from 'node:worker_threads';
import { ErrorCode, PanoptesError, startModuleWorker } from '../../core/index.js';
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

export type TrainingRequest = { id: number } & ({ kind: 'head'; job: HeadJob } | { kind: 'cache'; job: CacheHeadJob });
export type TrainingReply = { id: number; trained?: TrainedHead | TrainedCache; error?: string };

const buffers = (arrays: readonly (ArrayBufferView | undefined)[]): ArrayBuffer[] => arrays.flatMap((a) => (a ? [a.buffer as ArrayBuffer] : []));

/** What a request's job or a reply's result moves to the other thread instead of copying. */
export function transfers(of: HeadJob | CacheHeadJob | TrainedHead | TrainedCache): ArrayBuffer[] {
  if ('targets' in of) return buffers([of.hidden, of.features, of.targets, of.evaluate, ...Object.values(of.init ?? {})]);
  if ('labels' in of) return buffers([of.features, of.labels, of.evaluate]);
  if ('bias' in of) return buffers([of.weights, of.bias, of.predictions, of.probabilities]);
  return buffers([...Object.values(of.weights), of.evaluation?.predicted, of.evaluation?.hit]);
}

export function createHeadTrainer(): HeadTrainer {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, { resolve: (trained: unknown) => void; reject: (err: Error) => void }>();
  const failAll = (err: Error): void => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    worker = undefined;
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = startModuleWorker(import.meta.url, 'worker');
    w.on('message', (message: TrainingReply) => {
      const p = pending.get(message.id);
      pending.delete(message.id);
      if (message.trained) p?.resolve(message.trained);
      else p?.reject(new PanoptesError(ErrorCode.ModelRun, `training failed: ${message.error ?? 'unknown error'}`));
    });
    w.on('error', (err) => failAll(new PanoptesError(ErrorCode.ModelRun, `the training thread failed: ${err.message}`, { cause: err })));
    w.on('exit', (code) => failAll(new PanoptesError(ErrorCode.ModelRun, `the training thread exited (${code})`)));
    // Idle, it must not keep the process alive.
    w.unref();
    return (worker = w);
  };
  function submit<T>(request: Omit<TrainingRequest, 'id'>): Promise<T> {
    const w = started();
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (trained: unknown) => void, reject });
      w.ref();
      try {
        w.postMessage({ ...request, id }, transfers(request.job));
      } catch (err) {
        pending.delete(id);
        reject(new PanoptesError(ErrorCode.ModelRun, `training failed: its job could not be sent to the training thread: ${(err as Error).message}`, { cause: err }));
      }
    }).finally(() => {
      if (pending.size === 0) worker?.unref();
    });
  }
  return {
    train: async (job) => submit<TrainedHead>({ kind: 'head', job }),
    trainCache: async (job) => submit<TrainedCache>({ kind: 'cache', job }),
    async close() {
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
