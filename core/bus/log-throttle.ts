/**
 * Bounded logging of something that repeats: the first occurrence is logged at once, the
 * repeats within the next `intervalMs` are counted and said in one summary line when the
 * interval ends, and so on while they go on. A broker that is away for a minute makes a client
 * fail hundreds of requests; an operator needs the first line and a count, not a flood that
 * hides everything else (and costs CPU while the pipeline is already in trouble).
 */

export interface LogThrottle {
  /**
   * `write(repeats)` logs: with 0 for the first of its `key`, then, at most once per interval,
   * with the number of repeats since the last line (it should say that number).
   */
  log(key: string, write: (repeats: number) => void): void;
  /** Says the repeats still counted and stops the timers. */
  close(): void;
}

interface Repeating {
  repeats: number;
  /** The latest occurrence's writer: the summary carries its fields. */
  write: (repeats: number) => void;
  timer: NodeJS.Timeout;
}

/** @param intervalMs - how often a repeating line is summarized. @defaultValue 30000 */
export function createLogThrottle(intervalMs = 30_000): LogThrottle {
  const repeating = new Map<string, Repeating>();

  const summarize = (key: string): void => {
    const entry = repeating.get(key);
    if (!entry) return;
    if (entry.repeats === 0) {
      // Quiet for a whole interval: the next occurrence is news again.
      repeating.delete(key);
      return;
    }
    entry.write(entry.repeats);
    entry.repeats = 0;
    entry.timer = setTimeout(() => summarize(key), intervalMs).unref();
  };

  return {
    log(key, write) {
      const entry = repeating.get(key);
      if (entry) {
        entry.repeats += 1;
        entry.write = write;
        return;
      }
      write(0);
      repeating.set(key, { repeats: 0, write, timer: setTimeout(() => summarize(key), intervalMs).unref() });
    },
    close() {
      for (const [key, entry] of repeating) {
        clearTimeout(entry.timer);
        if (entry.repeats > 0) entry.write(entry.repeats);
        repeating.delete(key);
      }
    },
  };
}

/** The suffix a summary line carries: "(repeated 42 times in the last 30 s)". */
export function repeatedSuffix(repeats: number, intervalMs: number): string {
  return repeats === 0 ? '' : ` (repeated ${repeats} time${repeats === 1 ? '' : 's'} in the last ${Math.round(intervalMs / 1000)} s)`;
}
