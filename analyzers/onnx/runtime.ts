import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { deserializeError, ErrorCode, PanoptesError, startModuleWorker, type Logger } from '../../core/index.js';
import type { LoadedModel, ModelRuntime, NamedTensors } from '../runtime/index.js';
import { transferList, type WorkerRequest, type WorkerResponse } from './protocol.js';

// onnxruntime 1.29 and later report to Microsoft from Linux too: a device id written under
// ~/.cache, files left in /tmp, uploads tried. Off here unless the user set the variable (the
// native library reads it when it starts, in the worker threads, which share this environment).
process.env.ORT_DISABLE_TELEMETRY ??= '1';

export interface OnnxRuntimeOptions {
  /** Worker threads; each loads every model and runs one batch at a time. Default 1. */
  workers?: number;
  /** Threads onnxruntime uses inside one run. Default: the cores divided among the workers. */
  intraOpThreads?: number;
  /**
   * Whether those threads spin between runs instead of sleeping. Off by default: the cores are
   * shared with decoding, resizing and the sink, and a spinning pool takes them from those (the
   * model alone runs as fast either way here). On gives steadier latency on cores of its own.
   */
  spinning?: boolean;
  logger: Logger;
}

/** `Omit` that keeps a union a union. */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

type Pending = { resolve: (r: WorkerResponse) => void; reject: (e: Error) => void };

/** A worker thread and the requests it has not answered yet. */
class WorkerHandle {
  readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | undefined;

  constructor(readonly worker: Worker) {
    worker.on('message', (response: WorkerResponse) => {
      const waiter = this.pending.get(response.id);
      this.pending.delete(response.id);
      if (!waiter) return;
      if (response.type === 'failed') waiter.reject(deserializeError(response.error));
      else waiter.resolve(response);
    });
    const failAll = (err: Error): void => {
      this.failure = err;
      for (const waiter of this.pending.values()) waiter.reject(err);
      this.pending.clear();
    };
    worker.on('error', (err) => failAll(new PanoptesError(ErrorCode.ModelRun, `model worker crashed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => failAll(new PanoptesError(ErrorCode.Closed, `model worker exited (code ${code})`)));
  }

  request(message: WithoutId<WorkerRequest>, transfer: ArrayBuffer[] = []): Promise<WorkerResponse> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }
}

export function createOnnxRuntime(options: OnnxRuntimeOptions): ModelRuntime {
  const workerCount = Math.max(1, options.workers ?? 1);
  const intraOpThreads = options.intraOpThreads ?? Math.max(1, Math.floor(availableParallelism() / workerCount));
  const handles = Array.from({ length: workerCount }, () => new WorkerHandle(startModuleWorker(import.meta.url, 'worker')));
  const logger = options.logger.child({ module: 'analyzers.onnx' });
  let modelCount = 0;

  const leastBusy = (): WorkerHandle =>
    handles.reduce((best, h) => (h.pending.size < best.pending.size ? h : best));

  return {
    name: 'onnxruntime-node',
    lanes: workerCount,
    async load({ name, file }): Promise<LoadedModel> {
      const modelId = `${name}#${++modelCount}`;
      const started = Date.now();
      const responses = await Promise.all(
        handles.map((h) => h.request({ type: 'load', modelId, file, intraOpThreads, spinning: options.spinning ?? false })),
      );
      const first = responses[0];
      if (first?.type !== 'loaded') throw new PanoptesError(ErrorCode.ModelLoad, `unexpected reply loading ${name}`);
      logger.info({ model: name, file, ms: Date.now() - started, workers: workerCount }, 'model loaded');
      return {
        name,
        inputNames: first.inputNames,
        outputNames: first.outputNames,
        async run(feeds: NamedTensors): Promise<NamedTensors> {
          checkFeeds(name, feeds);
          const response = await leastBusy().request({ type: 'run', modelId, feeds }, transferList(feeds));
          if (response.type !== 'ran') throw new PanoptesError(ErrorCode.ModelRun, `unexpected reply running ${name}`);
          return response.outputs;
        },
        async time(feeds: NamedTensors, runs: number): Promise<number> {
          checkFeeds(name, feeds);
          const response = await leastBusy().request({ type: 'time', modelId, feeds, runs }, transferList(feeds));
          if (response.type !== 'timed') throw new PanoptesError(ErrorCode.ModelRun, `unexpected reply timing ${name}`);
          return response.ms;
        },
        async dispose(): Promise<void> {
          await Promise.all(handles.map((h) => h.request({ type: 'unload', modelId })));
        },
      };
    },
    beside: (threads) => createOnnxRuntime({ ...options, workers: 1, intraOpThreads: threads }),
    async close(): Promise<void> {
      await Promise.all(handles.map((h) => h.worker.terminate()));
    },
  };
}

/**
 * A run takes its inputs' buffers (they move to the model's thread). One whose buffer was taken
 * already would never arrive: Node drops a message whose transfer list holds a detached buffer,
 * without an error, and the run would wait for ever.
 */
function checkFeeds(model: string, feeds: NamedTensors): void {
  for (const [input, t] of Object.entries(feeds)) {
    const elements = t.dims.reduce((a, b) => a * b, 1);
    if (t.data.length === elements) continue;
    const why = t.data.length === 0 ? 'its buffer was handed to an earlier run (a run takes its inputs\' buffers)' : `its dims [${t.dims.join(', ')}] hold ${elements} values`;
    throw new PanoptesError(ErrorCode.ModelRun, `model ${model}: input '${input}' has ${t.data.length} values, and ${why}`, { details: { model, input } });
  }
}
