import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { createExecutor } from '../../analyzers/backend/executor.js';
import { RealtimeForecast } from '../../analyzers/backend/plan-ahead.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('plan-ahead forecast (DeepQuery §2.8)', () => {
  it('expects the next real-time request one mean gap after the last, and the batch serving it to start by then plus its slack less its run', () => {
    const forecast = new RealtimeForecast();
    expect(forecast.latestEndMs(0, () => 10)).toBe(Infinity);
    for (const at of [0, 100, 200]) forecast.arrived('live', at, at + 150);
    // Next arrival at 300, due at 450; its batch (10 ms) must start by 440.
    expect(forecast.latestEndMs(210, () => 10)).toBe(440);
    // Overdue: it may come any moment.
    expect(forecast.latestEndMs(350, () => 10)).toBe(490);
    // Silent for four gaps: no longer expected.
    expect(forecast.nextChangeMs(350)).toBe(600);
    expect(forecast.latestEndMs(600, () => 10)).toBe(Infinity);
  });

  it("counts a frame's crops, arriving together, as one arrival", () => {
    const forecast = new RealtimeForecast();
    for (const at of [0, 100, 200]) for (let crop = 0; crop < 5; crop++) forecast.arrived('read', at + crop * 0.1, at + 500);
    // The gap is a frame's (100 ms), not a crop's: still expected 300 ms after the last burst.
    expect(forecast.nextChangeMs(210)).toBe(600);
  });
});

/**
 * A live stream (a request every 200 ms, due 150 ms later, 20 ms to run, 30 ms in its profile)
 * and a replay faster than real time (80 requests, delay-tolerant, 35 ms each, 40 in its profile,
 * target batch 8) on one device. The replay starts once the stream is under way.
 */
async function colocate(planAhead: boolean, contention?: { slower: number; measured: boolean }): Promise<{ late: number; live: number; replayed: number; replayedWhileLive: number; maxLagMs: number }> {
  // How late the event loop itself ran: on a machine busy with other work a timer can fire past a deadline whatever the executor does.
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const started = performance.now();
  const now = (): number => performance.now() - started;
  let [late, live, replayed] = [0, 0, 0];
  const executor = createExecutor<string, number, void>({ policy: 'early', planAhead, now, onDrop: (_, dropped) => void (late += dropped.length) });
  const slower = contention?.slower ?? 1;
  const session = (id: string, targetBatch: number, runMs: number, profileMs: number) => ({
    id,
    targetBatch,
    latency: (b: number) => profileMs * b,
    ...(contention?.measured ? { measuredLatency: (b: number) => slower * runMs * b } : {}),
    prepare: (batch: readonly unknown[]) => batch.length,
    execute: (size: number) => sleep(slower * runMs * size),
    finish: async (batch: readonly { deadlineMs: number }[]) => {
      const at = now();
      for (const r of batch) {
        if (r.deadlineMs === Infinity) replayed += 1;
        else if (at > r.deadlineMs) late += 1;
      }
    },
  });
  executor.setSessions([session('live', 1, 20, 30), session('replay', 8, 35, 40)]);
  for (let i = 0; i < 12; i++) {
    if (i === 3) for (let r = 0; r < 80; r++) executor.submit('replay', { deadlineMs: Infinity, item: `replay-${r}` });
    const at = i * 200;
    await sleep(Math.max(0, at - now()));
    executor.submit('live', { deadlineMs: now() + 150, item: `live-${i}` });
    live += 1;
  }
  const replayedWhileLive = replayed;
  await executor.drain();
  lag.disable();
  return { late, live, replayed, replayedWhileLive, maxLagMs: lag.max / 1e6 };
}

describe('co-location with plan-ahead (DeepQuery §2.8)', () => {
  it('never makes a live request late where naive co-location does, and still runs the replay in between', async () => {
    const naive = await colocate(false);
    let planned = await colocate(true);
    // A late request while the event loop itself stalled (other test files on the same cores) says nothing of the
    // executor: measured again, up to twice. One late while the loop kept time fails at once.
    for (let again = 0; again < 2 && planned.late > 0 && planned.maxLagMs > 30; again++) planned = await colocate(true);
    console.log(`live late: naive ${naive.late}/${naive.live}, plan-ahead ${planned.late}/${planned.live}; replayed while live ${naive.replayedWhileLive} and ${planned.replayedWhileLive} of 80`);
    expect(naive.late).toBeGreaterThan(0);
    expect(planned.late).toBe(0);
    // The replay ran between live batches, not only after them: the device's idle time (live
    // takes a tenth of it) carried at least half of what naive co-location pushed through.
    expect(planned.replayedWhileLive).toBeGreaterThanOrEqual(naive.replayedWhileLive / 2);
    // Drain lets what was held run: every replayed request is accounted either way.
    expect(planned.replayed).toBe(80);
    expect(naive.replayed).toBe(80);
  }, 30_000);

  it('under CPU contention (batches 2.5× their profile), sizes the replay by what the backend measures, keeping live on time where the profile alone does not', async () => {
    const byProfile = await colocate(true, { slower: 2.5, measured: false });
    const byMeasured = await colocate(true, { slower: 2.5, measured: true });
    console.log(`live late under contention: by the profile ${byProfile.late}/${byProfile.live}, by what is measured ${byMeasured.late}/${byMeasured.live}; replayed while live ${byProfile.replayedWhileLive} and ${byMeasured.replayedWhileLive}`);
    // 5 ms of slack separate a live batch from its deadline here: a loaded machine's timers may take one.
    expect(byProfile.late).toBeGreaterThanOrEqual(4);
    expect(byMeasured.late).toBeLessThanOrEqual(1);
    expect(byMeasured.replayedWhileLive).toBeGreaterThan(0);
  }, 60_000);
});
