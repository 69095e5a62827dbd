import type { Worker } from 'node:worker_threads';
import { ErrorCode, PanoptesError, startModuleWorker } from '../../core/index.js';
import type { HeadJob, TrainedHead } from './head.js';

/** Trains heads on a worker thread of its own, one job after another. */
export interface HeadTrainer {
  /** Takes ownership of the job's buffers (they move to the worker). */
  train(job: HeadJob): Promise<TrainedHead>;
  close(): Promise<void>;
}

export function createHeadTrainer(): HeadTrainer {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, { resolve: (head: TrainedHead) => void; reject: (err: Error) => void }>();
  const failAll = (err: Error): void => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    worker = undefined;
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = startModuleWorker(import.meta.url, 'worker');
    w.on('message', (message: { id: number; head?: TrainedHead; error?: string }) => {
      const p = pending.get(message.id);
      pending.delete(message.id);
      if (message.head) p?.resolve(message.head);
      else p?.reject(new PanoptesError(ErrorCode.ModelRun, `training a head failed: ${message.error ?? 'unknown error'}`));
    });
    w.on('error', (err) => failAll(new PanoptesError(ErrorCode.ModelRun, `the training thread failed: ${err.message}`, { cause: err })));
    w.on('exit', (code) => failAll(new PanoptesError(ErrorCode.ModelRun, `the training thread exited (${code})`)));
    // Idle, it must not keep the process alive.
    w.unref();
    return (worker = w);
  };
  return {
    train(job) {
      const w = started();
      const id = nextId++;
      return new Promise<TrainedHead>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        w.ref();
        try {
          w.postMessage({ id, job }, [job.features.buffer as ArrayBuffer, job.labels.buffer as ArrayBuffer, ...(job.evaluate ? [job.evaluate.buffer as ArrayBuffer] : [])]);
        } catch (err) {
          pending.delete(id);
          reject(new PanoptesError(ErrorCode.ModelRun, `training a head failed: its job could not be sent to the training thread: ${(err as Error).message}`, { cause: err }));
        }
      }).finally(() => {
        if (pending.size === 0) worker?.unref();
      });
    },
    async close() {
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
