import { setTimeout as delay } from 'node:timers/promises';

/** Time as a collaborator, so tests and the simulator can control it. */
export interface Clock {
  /** ms since epoch */
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The longest a Node timer waits; a longer delay fires after 1 ms (with a warning), so it is waited in parts. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    for (let left = ms; left > 0; left -= MAX_TIMER_MS) await delay(Math.min(left, MAX_TIMER_MS), undefined, signal ? { signal } : undefined);
  },
};
