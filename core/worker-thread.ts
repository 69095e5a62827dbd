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

/** What a module worker served by `serveRequests` answers: one reply per request; `ending` where the thread ends after it. */
type Reply = { id: number; result?: unknown; error?: string; ending?: true };

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
  let closed = false;
  let nextId = 0;
  /** Requests not yet answered, each with the thread it went to. */
  const pending = new Map<number, { thread: Worker; resolve: (result: unknown) => void; reject: (err: Error) => void }>();
  const failure = (message: string, cause?: unknown) => new PanoptesError(ErrorCode.ModelRun, message, cause === undefined ? {} : { cause });
  /** Idle, a thread must not keep the process alive. */
  const unrefIfIdle = (thread: Worker): void => {
    if (![...pending.values()].some((p) => p.thread === thread)) thread.unref();
  };
  /** Fails what went to `thread`, which is gone (a later thread's requests are not its own); the next request starts another. */
  const fail = (thread: Worker, err: Error): void => {
    for (const [id, p] of pending) {
      if (p.thread !== thread) continue;
      pending.delete(id);
      p.reject(err);
    }
    if (worker === thread) worker = undefined;
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = startModuleWorker(base, name);
    w.on('message', (message: Reply) => {
      const p = pending.get(message.id);
      if (!p) return;
      pending.delete(message.id);
      // The next request goes to a new thread.
      if (message.ending && worker === w) worker = undefined;
      if (message.error === undefined) p.resolve(message.result);
      else p.reject(failure(`${what} failed: ${message.error}`));
      unrefIfIdle(w);
    });
    w.on('error', (err) => fail(w, failure(`the ${what} thread failed: ${err.message}`, err)));
    w.on('exit', (code) => fail(w, failure(`the ${what} thread exited (${code})`)));
    w.unref();
    return (worker = w);
  };
  return {
    request<T>(message: Request, transfer: readonly ArrayBuffer[] = []): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        if (closed) throw failure(`${what} failed: closed`);
        const w = started();
        const id = nextId++;
        pending.set(id, { thread: w, resolve: resolve as (result: unknown) => void, reject });
        w.ref();
        try {
          w.postMessage({ ...message, id }, [...transfer]);
        } catch (err) {
          pending.delete(id);
          unrefIfIdle(w);
          reject(failure(`${what} failed: its request could not be sent to the ${what} thread: ${(err as Error).message}`, err));
        }
      });
    },
    async close() {
      closed = true;
      const w = worker;
      if (!w) return;
      fail(w, failure(`${what} failed: closed while it ran`));
      await w.terminate();
    },
  };
}

/**
 * The thread's side: answers each request `{ id, ...request }` with what `handle` gives, or its
 * error; `transfer` moves the result's buffers back. An error `fatal` says the thread cannot go on
 * from ends it once answered (its client starts another for the next request).
 */
export function serveRequests<Request>(
  handle: (request: Request) => Promise<{ result: unknown; transfer?: ArrayBuffer[] }> | { result: unknown; transfer?: ArrayBuffer[] },
  fatal: (err: unknown) => boolean = () => false,
): void {
  const reply = (id: number, err: unknown) => {
    if (!fatal(err)) return parentPort?.postMessage({ id, error: describeError(err) } satisfies Reply);
    parentPort?.postMessage({ id, error: describeError(err), ending: true } satisfies Reply);
    setImmediate(() => process.exit(1));
  };
  parentPort?.on('message', (message: Request & { id: number }) => {
    Promise.resolve()
      .then(() => handle(message))
      .then(({ result, transfer = [] }) => {
        try {
          parentPort?.postMessage({ id: message.id, result } satisfies Reply, transfer);
        } catch (err) {
          // A result that cannot be sent fails its request, not the thread.
          reply(message.id, err);
        }
      }, (err: unknown) => reply(message.id, err));
  });
}
