import { parentPort, Worker } from 'node:worker_threads';
import { describeError, ErrorCode, PanoptesError } from './errors.js';

/**
 * A worker thread on the module `<name>.js` beside `base` (an `import.meta.url`) when built, or
 * on `<name>.ts` through tsx's loader when running from source (tests, tsx): a worker does not
 * inherit the parent's loader hooks.
 */
export function startModuleWorker(base: string, name: string): Worker {
  if (!base.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, base));
  const tsx = import.meta.resolve('tsx/esm/api');
  const worker = new URL(`./${name}.ts`, base).href;
  return new Worker(`import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(worker)}); })`, { eval: true });
}

/** What a module worker served by `serveRequests` answers: one reply per request. */
type Reply = { id: number; result?: unknown; error?: string };

/**
 * Requests to a module worker whose thread answers each with `serveRequests`. The thread starts at
 * the first request, keeps the process alive only while a request is pending, and starts again
 * at the next request after it died (the requests pending then fail).
 */
export interface WorkerClient<Request> {
  /** `transfer`: buffers that move to the thread instead of being copied (the caller gives them up). */
  request<T>(message: Request, transfer?: readonly ArrayBuffer[]): Promise<T>;
  close(): Promise<void>;
}

/** `what` names the work in errors ("training": "training failed: …", "the training thread exited (1)"). */
export function createWorkerClient<Request extends object>(base: string, name: string, what: string): WorkerClient<Request> {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (err: Error) => void }>();
  const failAll = (err: Error): void => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    worker = undefined;
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = startModuleWorker(base, name);
    w.on('message', (message: Reply) => {
      const p = pending.get(message.id);
      pending.delete(message.id);
      if (message.error === undefined) p?.resolve(message.result);
      else p?.reject(new PanoptesError(ErrorCode.ModelRun, `${what} failed: ${message.error}`));
    });
    w.on('error', (err) => failAll(new PanoptesError(ErrorCode.ModelRun, `the ${what} thread failed: ${err.message}`, { cause: err })));
    w.on('exit', (code) => failAll(new PanoptesError(ErrorCode.ModelRun, `the ${what} thread exited (${code})`)));
    // Idle, it must not keep the process alive.
    w.unref();
    return (worker = w);
  };
  return {
    request<T>(message: Request, transfer: readonly ArrayBuffer[] = []): Promise<T> {
      const w = started();
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (result: unknown) => void, reject });
        w.ref();
        try {
          w.postMessage({ ...message, id }, [...transfer]);
        } catch (err) {
          pending.delete(id);
          reject(new PanoptesError(ErrorCode.ModelRun, `${what} failed: its request could not be sent to the ${what} thread: ${(err as Error).message}`, { cause: err }));
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

/** The thread's side: answers each request `{ id, ...request }` with what `handle` gives, or its error; `transfer` moves the result's buffers back. */
export function serveRequests<Request>(handle: (request: Request) => Promise<{ result: unknown; transfer?: ArrayBuffer[] }> | { result: unknown; transfer?: ArrayBuffer[] }): void {
  parentPort?.on('message', (message: Request & { id: number }) => {
    Promise.resolve()
      .then(() => handle(message))
      .then(
        ({ result, transfer = [] }) => parentPort?.postMessage({ id: message.id, result } satisfies Reply, transfer),
        (err: unknown) => parentPort?.postMessage({ id: message.id, error: describeError(err) } satisfies Reply),
      );
  });
}
