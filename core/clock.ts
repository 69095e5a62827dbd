import { setTimeout as delay } from 'node:timers/promises';

/** Time as a collaborator, so tests and the simulator can control it. */
export interface Clock {
  /** ms since epoch */
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    await delay(ms, undefined, signal ? { signal } : undefined);
  },
};
