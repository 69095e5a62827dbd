/**
 * Gathers requests from many callers into batches and runs one batch at a time.
 * A batch starts when `maxBatch` requests wait, or `maxWaitMs` after the first one arrived,
 * whichever comes first. Running one batch at a time keeps the accelerator exclusive.
 */
export interface Batcher<Req, Res> {
  submit(request: Req): Promise<Res>;
  /** Runs what is waiting now and resolves when everything submitted so far is done. */
  flush(): Promise<void>;
}

export function createBatcher<Req, Res>(options: {
  maxBatch: number;
  maxWaitMs: number;
  run: (requests: Req[]) => Promise<Res[]>;
}): Batcher<Req, Res> {
  type Entry = { request: Req; resolve: (r: Res) => void; reject: (e: unknown) => void };
  const waiting: Entry[] = [];
  let timer: NodeJS.Timeout | undefined;
  let chain = Promise.resolve();

  const startBatch = (): void => {
    clearTimeout(timer);
    timer = undefined;
    while (waiting.length > 0) {
      const entries = waiting.splice(0, options.maxBatch);
      chain = chain.then(async () => {
        try {
          const results = await options.run(entries.map((e) => e.request));
          if (results.length !== entries.length) throw new Error(`batch of ${entries.length} gave ${results.length} results`);
          entries.forEach((e, i) => e.resolve(results[i] as Res));
        } catch (err) {
          for (const e of entries) e.reject(err);
        }
      });
    }
  };

  return {
    submit(request) {
      return new Promise<Res>((resolve, reject) => {
        waiting.push({ request, resolve, reject });
        if (waiting.length >= options.maxBatch) startBatch();
        else timer ??= setTimeout(startBatch, options.maxWaitMs);
      });
    },
    async flush() {
      startBatch();
      await chain;
    },
  };
}
