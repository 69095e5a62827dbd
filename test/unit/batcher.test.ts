import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBatcher } from '../../analyzers/backend/index.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A `run` that records its batches and answers each request `n` with `n * 10`. */
function recorder(delayMs = 0): { run: (requests: number[]) => Promise<number[]>; batches: number[][] } {
  const batches: number[][] = [];
  return {
    batches,
    run: async (requests) => {
      batches.push([...requests]);
      if (delayMs > 0) await sleep(delayMs);
      return requests.map((n) => n * 10);
    },
  };
}

describe('batcher', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs full batches of maxBatch when many submit at once', async () => {
    const { run, batches } = recorder();
    const batcher = createBatcher({ maxBatch: 4, maxWaitMs: 20, run });
    const results = await Promise.all(Array.from({ length: 10 }, (_, n) => batcher.submit(n)));
    expect(results).toEqual(Array.from({ length: 10 }, (_, n) => n * 10));
    expect(batches).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
  });

  it('starts a full batch at once, without waiting for maxWaitMs', async () => {
    vi.useFakeTimers();
    const { run, batches } = recorder();
    const batcher = createBatcher({ maxBatch: 3, maxWaitMs: 1_000, run });
    const all = Promise.all([1, 2, 3].map((n) => batcher.submit(n)));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([[1, 2, 3]]);
    await expect(all).resolves.toEqual([10, 20, 30]);
  });

  it('runs a lone request after maxWaitMs, not before', async () => {
    vi.useFakeTimers();
    const { run, batches } = recorder();
    const batcher = createBatcher({ maxBatch: 8, maxWaitMs: 50, run });
    let result: number | undefined;
    void batcher.submit(7).then((r) => (result = r));
    await vi.advanceTimersByTimeAsync(49);
    expect(batches).toEqual([]);
    expect(result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([[7]]);
    expect(result).toBe(70);
  });

  it('counts maxWaitMs from the first request of a batch', async () => {
    vi.useFakeTimers();
    const { run, batches } = recorder();
    const batcher = createBatcher({ maxBatch: 8, maxWaitMs: 50, run });
    void batcher.submit(1);
    await vi.advanceTimersByTimeAsync(30);
    void batcher.submit(2);
    await vi.advanceTimersByTimeAsync(20);
    expect(batches).toEqual([[1, 2]]);
    void batcher.submit(3);
    await vi.advanceTimersByTimeAsync(49);
    expect(batches).toEqual([[1, 2]]);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([[1, 2], [3]]);
  });

  it('gives each caller its own result, whatever the order runs finish in', async () => {
    const batcher = createBatcher<string, string>({
      maxBatch: 3,
      maxWaitMs: 5,
      run: async (requests) => {
        await sleep(Math.random() * 5);
        return requests.map((r) => r.toUpperCase());
      },
    });
    const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf'];
    const pending = words.map(async (w, i) => {
      await sleep(i % 3);
      return batcher.submit(w);
    });
    expect(await Promise.all(pending)).toEqual(words.map((w) => w.toUpperCase()));
  });

  it('rejects only the callers of the batch whose run failed', async () => {
    const failure = new Error('the model crashed');
    const batches: string[][] = [];
    const batcher = createBatcher<string, string>({
      maxBatch: 2,
      maxWaitMs: 5,
      run: async (requests) => {
        batches.push(requests);
        if (requests.includes('bad')) throw failure;
        return requests.map((r) => `${r}!`);
      },
    });
    const settled = await Promise.allSettled(['a', 'b', 'bad', 'c', 'd', 'e'].map((r) => batcher.submit(r)));
    expect(batches).toEqual([
      ['a', 'b'],
      ['bad', 'c'],
      ['d', 'e'],
    ]);
    expect(settled).toEqual([
      { status: 'fulfilled', value: 'a!' },
      { status: 'fulfilled', value: 'b!' },
      { status: 'rejected', reason: failure },
      { status: 'rejected', reason: failure },
      { status: 'fulfilled', value: 'd!' },
      { status: 'fulfilled', value: 'e!' },
    ]);
    // It keeps going after a failure.
    await expect(batcher.submit('f')).resolves.toBe('f!');
  });

  it('never runs two batches at once', async () => {
    let active = 0;
    let most = 0;
    let runs = 0;
    let requestsRun = 0;
    const batcher = createBatcher<number, number>({
      maxBatch: 4,
      maxWaitMs: 2,
      run: async (requests) => {
        active += 1;
        runs += 1;
        requestsRun += requests.length;
        most = Math.max(most, active);
        await sleep(3);
        active -= 1;
        if (runs % 3 === 0) throw new Error('every third run fails');
        return requests;
      },
    });
    const pending: Promise<unknown>[] = [];
    for (let wave = 0; wave < 6; wave++) {
      for (let n = 0; n < 7; n++) pending.push(batcher.submit(wave * 10 + n).catch(() => undefined));
      await sleep(1);
    }
    await Promise.all(pending);
    expect(requestsRun).toBe(42);
    expect(runs).toBeGreaterThanOrEqual(Math.ceil(42 / 4));
    expect(most).toBe(1);
  });

  it('flush() runs what waits now and resolves once everything submitted is done', async () => {
    const { run, batches } = recorder(5);
    const batcher = createBatcher({ maxBatch: 4, maxWaitMs: 60_000, run });
    const done: number[] = [];
    const pending = [1, 2, 3, 4, 5, 6].map((n) => batcher.submit(n).then((r) => void done.push(r)));
    const started = Date.now();
    await batcher.flush();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(batches).toEqual([
      [1, 2, 3, 4],
      [5, 6],
    ]);
    expect(done.sort((a, b) => a - b)).toEqual([10, 20, 30, 40, 50, 60]);
    await Promise.all(pending);
  });

  it('flush() with nothing waiting resolves, and waits for a run in progress', async () => {
    const batcher = createBatcher({ maxBatch: 1, maxWaitMs: 10, run: recorder(20).run });
    await batcher.flush();
    let finished = false;
    void batcher.submit(1).then(() => (finished = true));
    await batcher.flush();
    expect(finished).toBe(true);
  });
});
