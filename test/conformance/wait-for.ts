/**
 * Test helpers for suites that must pass both on in-process fakes (done in milliseconds) and on
 * real servers (Kafka rebalances take seconds): poll a condition up to a generous deadline
 * instead of sleeping for a fixed time.
 */

export interface WaitOptions {
  /** @defaultValue 30_000 */
  timeoutMs?: number;
  /** @defaultValue 5 */
  intervalMs?: number;
}

/** Resolves once `condition` holds; fails with `what` in the message after the deadline. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  { timeoutMs = 30_000, intervalMs = 5 }: WaitOptions = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A promise with its resolve function, to hold a handler until the test lets it go. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
