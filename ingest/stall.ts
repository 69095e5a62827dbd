/**
 * The items of `source`, failing with `stalled()` when the next one takes longer than `ms` to
 * come while `progress()` (a count of work the source did, e.g. frames decoded) stands still.
 * Only the wait for the source counts: the time the consumer holds an item does not. Stopping
 * (an error, a `return`) ends the source's iteration too; after a stall, once the caller has
 * ended the source itself (an async generator runs a `return` only after the `next` still pending).
 */
export async function* eachWithin<T>(source: AsyncIterable<T>, ms: number, stalled: () => Error, progress: () => number = () => 0): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let pending = false;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        let seen = progress();
        const check = (): void => {
          const now = progress();
          if (now === seen) return reject(stalled());
          seen = now;
          timer = setTimeout(check, ms);
        };
        timer = setTimeout(check, ms);
      });
      pending = true;
      let next: IteratorResult<T>;
      try {
        next = await Promise.race([iterator.next(), late]);
        pending = false;
      } finally {
        clearTimeout(timer);
      }
      if (next.done) return;
      yield next.value;
    }
  } finally {
    const ended = iterator.return?.();
    if (pending) void Promise.resolve(ended).catch(() => undefined);
    else await ended;
  }
}
