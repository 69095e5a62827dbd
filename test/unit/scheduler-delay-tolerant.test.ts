import { describe, expect, it } from 'vitest';
import { planWeights, Topics, type Stats } from '../../core/index.js';
import { appDemands, idleTimeByBackend, linearProfile, occupancy, planEpoch, planIdleTime, profileLookup, type AppDemand } from '../../scheduler/index.js';

// ℓ(b) = 5b + 20 ms: best throughput at the largest batch, 32 in 180 ms (177.8/s).
const profileOf = profileLookup([linearProfile({ model: 'detector', alphaMs: 5, betaMs: 20, maxBatch: 32 })]);
const best = 32_000 / 180;

describe('delay-tolerant work in the idle time the plan leaves (DeepQuery)', () => {
  it("a node's idle time is its duty cycle less its batches, shared by the models in proportion to what they ask", () => {
    const node = { id: 'gpu-0', dedicated: false, dutyCycleMs: 120, sessions: [{ id: 'detector@1000', model: 'detector', sloMs: 1000, rate: 50, batch: 8 }] };
    expect(occupancy(node, profileOf)).toBeCloseTo(60 / 120, 10);
    // Half of gpu-0 is idle: it allows half a device's best throughput, whatever the rate offered.
    const idle = planIdleTime(idleTimeByBackend([node], { 'gpu-0': 'b1' }, ['b1'], profileOf), [{ model: 'detector', rate: 1000 }], profileOf);
    expect(idle.idleDevices).toBeCloseTo(0.5, 10);
    expect(idle.backends).toEqual({ b1: expect.closeTo(0.5, 10) });
    expect(idle.models[0]!.capacity).toBeCloseTo(0.5 * best, 6);
    // Two models asking for the same device time share it equally.
    const shared = planIdleTime({ b1: 0.5 }, [{ model: 'detector', rate: 100 }, { model: 'detector-b', rate: 100 }], profileLookup([linearProfile({ model: 'detector', alphaMs: 5, betaMs: 20, maxBatch: 32 }), linearProfile({ model: 'detector-b', alphaMs: 5, betaMs: 20, maxBatch: 32 })]));
    expect(shared.models.map((m) => m.capacity)).toEqual([0.25 * best, 0.25 * best].map((c) => expect.closeTo(c, 6)));
  });

  it('plans real-time frames only, and states what the idle time allows the replay', () => {
    const app = (framesRate: number, delayTolerantRate: number): AppDemand => ({
      app: 'road',
      sloMs: 1000,
      nodes: [{ id: 'detect', model: 'detector' }],
      edges: [{ from: 'frames', to: 'detect' }],
      framesRate,
      delayTolerantRate,
      gammas: {},
    });
    const input = (a: AppDemand) => ({ epoch: 1, nowMs: 0, apps: [a], backends: ['b1', 'b2'] });
    const alone = planEpoch(input(app(40, 0)), profileOf, { epsilonMs: 10 }).plan;
    const withReplay = planEpoch(input(app(40, 300)), profileOf, { epsilonMs: 10 }).plan;
    // The replay's 300 frames/s are not packed: the same nodes and batches as the live stream alone.
    expect(withReplay.backends).toEqual(alone.backends);
    expect(alone.delayTolerant).toBeUndefined();
    const [replay] = withReplay.delayTolerant!.models;
    expect(replay).toMatchObject({ model: 'detector', rate: 300 });
    // The idle time of the one node the live stream needs, and all of the backend it leaves free.
    const [live] = withReplay.backends.map((b) => b.backend);
    const free = live === 'b1' ? 'b2' : 'b1';
    const idle = withReplay.delayTolerant!.backends!;
    expect(idle[free]).toBe(1);
    expect(idle[live!]).toBeGreaterThan(0);
    expect(idle[live!]).toBeLessThan(1);
    expect(replay!.capacity).toBeCloseTo((1 + idle[live!]!) * best, 6);
    // Replayed frames go to both backends by their idle time; live frames only where their session runs.
    expect(planWeights(withReplay)(Topics.backfillFrames)).toEqual(idle);
    expect(Object.keys(planWeights(withReplay)(Topics.frames)!)).toEqual([live]);
  });

  it("reads the delay-tolerant share of each app's frames from the backends' stats", () => {
    const stats = (framesRate: number, delayTolerantFramesRate?: number): Stats => ({
      backend: 'b1', fromMs: 0, toMs: 1000, sessions: [], edges: [], apps: [{ app: 'road', framesRate, ...(delayTolerantFramesRate === undefined ? {} : { delayTolerantFramesRate }) }],
    });
    const road = { app: 'road', sloMs: 1000, nodes: [{ id: 'detect', model: 'detector' }], edges: [{ from: 'frames', to: 'detect' }] };
    expect(appDemands([road], [stats(50, 30), stats(10)])[0]).toMatchObject({ framesRate: 30, delayTolerantRate: 30 });
  });
});
