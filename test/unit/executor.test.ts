import { describe, expect, it } from 'vitest';
import { createExecutor, type ExecutableSession } from '../../analyzers/backend/executor.js';
import type { DropPolicy } from '../../analyzers/index.js';
import type { Queued } from '../../analyzers/backend/session-queue.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What happened, in order, with times. */
type Event = { at: number; what: 'prepare' | 'execute-start' | 'execute-end' | 'finish-start' | 'finish-end'; session: string; items: string[] };

function harness(policy: DropPolicy = 'early', finishMs = 0, lanes = 1) {
  const events: Event[] = [];
  const done: string[] = [];
  const dropped: string[] = [];
  let executing = 0;
  let maxConcurrent = 0;
  const executor = createExecutor<string, string[], string[]>({
    policy,
    lanes,
    now: () => performance.now(),
    onDrop: (_, requests) => dropped.push(...requests.map((r) => r.item)),
  });
  const log = (what: Event['what'], session: string, items: string[]): void => {
    events.push({ at: performance.now(), what, session, items });
  };
  const session = (id: string, targetBatch: number, msPerBatch: number): ExecutableSession<string, string[], string[]> => ({
    id,
    targetBatch,
    latency: () => msPerBatch,
    prepare: (batch) => {
      const items = batch.map((r) => r.item);
      log('prepare', id, items);
      return items;
    },
    async execute(items) {
      executing += 1;
      maxConcurrent = Math.max(maxConcurrent, executing);
      log('execute-start', id, items);
      await sleep(msPerBatch);
      log('execute-end', id, items);
      executing -= 1;
      return items;
    },
    async finish(batch, result) {
      log('finish-start', id, result ?? []);
      await sleep(finishMs);
      done.push(...batch.map((r) => r.item));
      log('finish-end', id, result ?? []);
    },
  });
  const request = (item: string, deadlineMs = performance.now() + 10_000): Queued<string> => ({ item, deadlineMs });
  return { executor, session, request, events, done, dropped, maxConcurrent: () => maxConcurrent };
}

describe('the executor', () => {
  it('runs one batch at a time, round-robin over the sessions, up to each target batch', async () => {
    const h = harness();
    for (let i = 0; i < 6; i++) h.executor.submit('a', h.request(`a${i}`));
    for (let i = 0; i < 4; i++) h.executor.submit('b', h.request(`b${i}`));
    h.executor.setSessions([h.session('a', 2, 10), h.session('b', 2, 10)]);
    await h.executor.drain();

    expect(h.maxConcurrent()).toBe(1);
    const runs = h.events.filter((e) => e.what === 'execute-start').map((e) => `${e.session}:${e.items.join(',')}`);
    expect(runs).toEqual(['a:a0,a1', 'b:b0,b1', 'a:a2,a3', 'b:b2,b3', 'a:a4,a5']);
    expect(h.done.sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'b0', 'b1', 'b2', 'b3']);
    expect(h.dropped).toEqual([]);
  });

  it('prepares the next batch while one executes, and finishes the last one while the next executes', async () => {
    const h = harness('early', 30);
    for (let i = 0; i < 4; i++) h.executor.submit('a', h.request(`a${i}`));
    h.executor.setSessions([h.session('a', 2, 40)]);
    await h.executor.drain();

    const at = (what: Event['what'], first: string): number => h.events.find((e) => e.what === what && e.items[0] === first)!.at;
    expect(at('prepare', 'a2')).toBeLessThan(at('execute-end', 'a0'));
    // The second batch starts before the first has finished its (30 ms) post-processing.
    expect(at('execute-start', 'a2')).toBeLessThan(at('finish-end', 'a0'));
    expect(h.maxConcurrent()).toBe(1);
  });

  it('runs as many batches at once as it has lanes, and no more, each session still in turn', async () => {
    const h = harness('early', 0, 2);
    for (let i = 0; i < 8; i++) h.executor.submit('a', h.request(`a${i}`));
    for (let i = 0; i < 4; i++) h.executor.submit('b', h.request(`b${i}`));
    const started = performance.now();
    h.executor.setSessions([h.session('a', 2, 40), h.session('b', 2, 40)]);
    await h.executor.drain();

    expect(h.maxConcurrent()).toBe(2);
    // Taken in turn; which lane frees first decides the order they start in.
    const taken = h.events.filter((e) => e.what === 'prepare').map((e) => `${e.session}:${e.items.join(',')}`);
    expect(taken).toEqual(['a:a0,a1', 'b:b0,b1', 'a:a2,a3', 'b:b2,b3', 'a:a4,a5', 'a:a6,a7']);
    expect(h.done.sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'b0', 'b1', 'b2', 'b3']);
    // Six batches of 40 ms in two lanes: three rounds, not six.
    expect(performance.now() - started).toBeLessThan(5 * 40);
  });

  it('starts a second lane for a request that arrives while the first is busy', async () => {
    const h = harness('early', 0, 2);
    h.executor.setSessions([h.session('a', 4, 60)]);
    h.executor.submit('a', h.request('first'));
    await sleep(10);
    h.executor.submit('a', h.request('second'));
    await h.executor.drain();

    const at = (what: Event['what'], item: string): number => h.events.find((e) => e.what === what && e.items[0] === item)!.at;
    expect(at('execute-start', 'second')).toBeLessThan(at('execute-end', 'first'));
  });

  it('resolves every drain waiting at once', async () => {
    const h = harness();
    h.executor.setSessions([h.session('a', 1, 30)]);
    for (let i = 0; i < 3; i++) h.executor.submit('a', h.request(`a${i}`));
    await Promise.all([h.executor.drain(), h.executor.drain()]);
    expect(h.done.sort()).toEqual(['a0', 'a1', 'a2']);
  });

  it('serves what a session holds when the plan moves it away, then lets it go', async () => {
    const h = harness();
    for (let i = 0; i < 4; i++) h.executor.submit('a', h.request(`a${i}`));
    h.executor.setSessions([h.session('a', 1, 5)]);
    h.executor.setSessions([h.session('b', 1, 5)]);
    h.executor.submit('b', h.request('b0'));
    await h.executor.drain();
    expect(h.done.sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'b0']);
    expect(h.executor.queued()).toEqual({ b: 0 });
  });

  it('fails only the request whose input cannot be prepared, and runs the rest of its batch without it', async () => {
    const h = harness();
    const finished: { items: string[]; result?: string[]; error?: string }[] = [];
    const ran: string[][] = [];
    const session = h.session('a', 4, 5);
    session.prepare = (batch) => {
      if (batch.some((r) => r.item.startsWith('bad'))) throw new Error(`cannot decode ${batch.map((r) => r.item).join('+')}`);
      return batch.map((r) => r.item);
    };
    session.execute = async (items) => (ran.push(items), items);
    session.finish = async (batch, result, error) => void finished.push({ items: batch.map((r) => r.item), ...(result && { result }), ...(error !== undefined && { error: String(error) }) });
    for (const item of ['a0', 'bad1', 'a2', 'a3', 'bad4', 'bad5']) h.executor.submit('a', h.request(item));
    h.executor.setSessions([session]);
    await h.executor.drain();
    expect(ran).toEqual([['a0', 'a2', 'a3']]);
    expect(finished).toEqual([
      { items: ['bad1'], error: 'Error: cannot decode bad1' },
      { items: ['a0', 'a2', 'a3'], result: ['a0', 'a2', 'a3'] },
      // A batch where every input fails alone fails as a batch, with the batch's error.
      { items: ['bad4', 'bad5'], error: 'Error: cannot decode bad4+bad5' },
    ]);
  });

  it('drops early what cannot meet its deadline, and reports it', async () => {
    const h = harness('early');
    const now = performance.now();
    h.executor.submit('a', h.request('late', now + 5)); // a batch takes 20 ms
    h.executor.submit('a', h.request('fine', now + 1000));
    h.executor.setSessions([h.session('a', 2, 20)]);
    await h.executor.drain();
    expect(h.dropped).toEqual(['late']);
    expect(h.done).toEqual(['fine']);
  });

  it('puts back a delay-tolerant batch chosen ahead when a real-time request comes in meanwhile, even of a session the plan dropped, and serves both', async () => {
    const h = harness();
    const [live, replay] = [h.session('live', 1, 30), h.session('replay', 4, 30)];
    h.executor.submit('live', h.request('l0'));
    for (let i = 0; i < 4; i++) h.executor.submit('replay', h.request(`r${i}`, Infinity));
    // l0 runs; the replay's batch is chosen ahead while it does, emptying the replay's queue.
    h.executor.setSessions([live, replay]);
    // The plan drops the replay session (nothing queued: it leaves at once), and a live request comes in.
    h.executor.setSessions([live]);
    h.executor.submit('live', h.request('l1'));
    await h.executor.drain();

    const runs = h.events.filter((e) => e.what === 'execute-start').map((e) => `${e.session}:${e.items.join(',')}`);
    expect(runs).toEqual(['live:l0', 'live:l1', 'replay:r0,r1,r2,r3']);
    expect(h.done.sort()).toEqual(['l0', 'l1', 'r0', 'r1', 'r2', 'r3']);
  });
});

describe('the executor, a session run in stages (group-wise execution)', () => {
  /** A session of `stages` stages at `msPerStep` each whatever the batch, logging each step as `stage:items`. */
  function staged(stages: number, msPerStep: number, failing?: string) {
    const steps: string[] = [];
    const done: string[] = [];
    const failed: string[] = [];
    const dropped: string[] = [];
    const executor = createExecutor<string, { stage: number; items: string[] }, { stage: number; items: string[] }>({
      policy: 'tardy',
      now: () => performance.now(),
      onDrop: (_, requests) => dropped.push(...requests.map((r) => r.item)),
    });
    const session: ExecutableSession<string, { stage: number; items: string[] }, { stage: number; items: string[] }> = {
      id: 'a',
      targetBatch: 4,
      latency: () => stages * msPerStep,
      stageLatency: { stages, maxBatch: 4, latencyMs: () => msPerStep },
      prepare: (batch, stage) => ({ stage, items: batch.map((r) => r.item) }),
      async execute(step) {
        steps.push(`${step.stage}:${step.items.join(',')}`);
        await sleep(msPerStep);
        if (failing && step.items.includes(failing)) throw new Error('the model failed');
        return step;
      },
      async finish(batch, result, _error, stage) {
        if (!result) failed.push(...batch.map((r) => r.item));
        else if (stage === stages - 1) done.push(...batch.map((r) => r.item));
      },
    };
    return { executor, session, steps, done, failed, dropped };
  }

  it('holds the first requests at a stage while a later one catches up, then runs them as one batch to the end', async () => {
    const h = staged(3, 20);
    const due = performance.now() + 10_000;
    h.executor.submit('a', { item: 'a0', deadlineMs: due });
    h.executor.submit('a', { item: 'a1', deadlineMs: due });
    // Queued before the session was known to run in stages: they start at stage 0 all the same.
    h.executor.setSessions([h.session]);
    await sleep(5); // a0 and a1 are in their first stage
    h.executor.submit('a', { item: 'a2', deadlineMs: due });
    await h.executor.drain();

    expect(h.steps).toEqual(['0:a0,a1', '0:a2', '1:a0,a1,a2', '2:a0,a1,a2']);
    expect(h.done.sort()).toEqual(['a0', 'a1', 'a2']);
    expect(h.dropped).toEqual([]);
  });

  it('drops a request its stages cannot finish in time, and keeps the others on time', async () => {
    const h = staged(3, 20);
    const now = performance.now();
    h.executor.submit('a', { item: 'late', deadlineMs: now + 30 });
    h.executor.submit('a', { item: 'ok', deadlineMs: now + 10_000 });
    h.executor.setSessions([h.session]);
    await h.executor.drain();

    expect(h.dropped).toEqual(['late']);
    expect(h.done).toEqual(['ok']);
    expect(h.steps).toEqual(['0:ok', '1:ok', '2:ok']);
  });

  it('settles the requests of a failed step at once, and goes on with the others', async () => {
    const h = staged(3, 5, 'b0');
    const due = performance.now() + 10_000;
    h.executor.submit('a', { item: 'a0', deadlineMs: due });
    h.executor.setSessions([h.session]);
    await sleep(2);
    h.executor.submit('a', { item: 'b0', deadlineMs: due });
    await h.executor.drain();
    expect(h.failed).toEqual(['b0']);
    expect(h.done).toEqual(['a0']);
    expect(h.executor.queued()).toEqual({ a: 0 });
  });
});
