import { describe, expect, it } from 'vitest';
import { chooseBatch, type DropPolicy } from '../../analyzers/index.js';
import { ErrorCode, PanoptesError } from '../../core/index.js';
import {
  arrivalStream,
  linearProfile,
  maxGoodLoad,
  paperProfiles,
  profileLookup,
  runExperiments,
  runSimulation,
  squishyBinPacking,
  squishyVsOblivious,
  type ArrivalSpec,
  type BatchRecord,
  type GpuNode,
  type Session,
  type SimSession,
  type SimulationConfig,
  type SimulationResult,
} from '../../scheduler/index.js';

/** ℓ(b) = b + 9 ms: ℓ(1) = 10, ℓ(2) = 11, ℓ(4) = 13. */
const small = profileLookup([linearProfile({ model: 'm', alphaMs: 1, betaMs: 9, maxBatch: 4 })]);

const oneNode = (sloMs: number, batch: number): GpuNode[] => [
  { id: 'gpu-0', dedicated: true, dutyCycleMs: 13, sessions: [{ id: 's', model: 'm', sloMs, rate: 1, batch }] },
];

/** The §2.6 setup: one GPU, SLO 100 ms, 500 req/s at batch 25 (ℓ(25) = 50 ms), α = 0.1 ms. */
const section26 = profileLookup([linearProfile({ model: 'm', alphaMs: 0.1, betaMs: 47.5, maxBatch: 25 })]);
const section26Run = (drop: DropPolicy, rate: number, seed = 1): SimulationResult =>
  runSimulation({
    sessions: [{ id: 's', model: 'm', sloMs: 100, arrivals: { kind: 'poisson', rate } }],
    profileOf: section26,
    plan: [{ id: 'gpu-0', dedicated: true, dutyCycleMs: 50, sessions: [{ id: 's', model: 'm', sloMs: 100, rate, batch: 25 }] }],
    drop,
    durationMs: 20_000,
    seed,
  });

describe('batch formation (Nexus §4.3, §6.3)', () => {
  const due = [21, 22, 23, 24, 25, 26];
  const dueAt = (i: number): number => due[i]!;

  it('early drop slides a window of the plan batch to the first request that makes it with the whole window', () => {
    // At 10 ms a window of 4 takes 13 ms: ends 23 > 21, > 22; from the third request it ends 23 ≤ 23.
    expect(chooseBatch('early', dueAt, 0, due.length, 10, 4, small('m').latency)).toEqual({ start: 2, size: 4 });
    // The window shrinks at the tail of the queue.
    expect(chooseBatch('early', dueAt, 4, due.length, 10, 4, small('m').latency)).toEqual({ start: 4, size: 2 });
    expect(chooseBatch('early', dueAt, 0, due.length, 20, 4, small('m').latency)).toEqual({ start: 6, size: 0 });
  });

  it('lazy drop serves the oldest request that can still make it, in the largest batch its deadline allows', () => {
    expect(chooseBatch('lazy', dueAt, 0, due.length, 10, 4, small('m').latency)).toEqual({ start: 0, size: 2 });
    // At 12 ms the first request cannot finish by 21 ms even alone (22 ms): dropped.
    expect(chooseBatch('lazy', dueAt, 0, due.length, 12, 4, small('m').latency)).toEqual({ start: 1, size: 1 });
    expect(chooseBatch('lazy', dueAt, 0, due.length, 17, 4, small('m').latency)).toEqual({ start: 6, size: 0 });
  });
});

describe('discrete-event simulator', () => {
  it('a hand-checked burst: early drop skips two requests to run a full batch, lazy drop serves the oldest and loses four', () => {
    // SLO 20 ms; arrivals at 0..6 ms. Request 0 runs alone 0-10 ms. At 10 ms requests 1-6 (due 21-26) wait.
    const run = (drop: DropPolicy): { result: SimulationResult; batches: BatchRecord[] } => {
      const batches: BatchRecord[] = [];
      const result = runSimulation({
        sessions: [{ id: 's', model: 'm', sloMs: 20, arrivals: { kind: 'trace', timesMs: [0, 1, 2, 3, 4, 5, 6] } }],
        profileOf: small,
        plan: oneNode(20, 4),
        drop,
        durationMs: 1000,
        seed: 1,
        onBatch: (b) => batches.push(b),
      });
      return { result, batches };
    };
    // Early: 1 and 2 dropped, 3-6 run 10-23 ms (due 23-26): 5 good.
    const early = run('early');
    expect(early.result).toMatchObject({ requests: 7, good: 5, late: 0, dropped: 2 });
    expect(early.batches.map((b) => [b.startMs, b.endMs, b.size])).toEqual([
      [0, 10, 1],
      [10, 23, 4],
    ]);
    // Lazy: 1 and 2 run 10-21 ms; at 21 ms none of 3-6 can finish by 23-26 ms: 3 good, 4 dropped.
    const lazy = run('lazy');
    expect(lazy.result).toMatchObject({ requests: 7, good: 3, late: 0, dropped: 4 });
    expect(lazy.batches.map((b) => [b.startMs, b.endMs, b.size])).toEqual([
      [0, 10, 1],
      [10, 21, 2],
    ]);
    expect(early.result.badRate).toBeCloseTo(2 / 7, 12);
  });

  it('invariants on random overloaded clusters: exclusive nodes, batches within the plan, every request accounted, early drop never late', () => {
    const models = ['resnet50', 'inception4', 'googlenet-car', 'ssd'] as const;
    for (let seed = 1; seed <= 12; seed++) {
      const sessions: Session[] = Array.from({ length: 6 }, (_, i) => {
        const model = models[(seed + i) % models.length] as string;
        return { id: `s${i}`, model, sloMs: model === 'ssd' ? 300 : 50 + 50 * ((seed * i) % 4), rate: 20 + ((seed * 37 + i * 53) % 400) };
      });
      const plan = squishyBinPacking(sessions, paperProfiles).nodes;
      // Offered load 1.5× what was planned, with fan-out from the first session into the second.
      const simSessions: SimSession[] = sessions.map((s, i) => ({
        ...s,
        arrivals: i === 1 ? undefined : ({ kind: seed % 2 ? 'poisson' : 'pareto', rate: 1.5 * s.rate } as ArrivalSpec),
        children: i === 0 ? [{ session: 's1', gamma: 2 }] : undefined,
      }));
      for (const drop of ['early', 'lazy'] as const) {
        const batches: BatchRecord[] = [];
        const result = runSimulation({ sessions: simSessions, profileOf: paperProfiles, plan, drop, durationMs: 5000, seed, onBatch: (b) => batches.push(b) });
        expectInvariants(result, batches, plan, `seed ${seed} ${drop}`);
        if (drop === 'early') expect(result.late, `seed ${seed}`).toBe(0);
        // Every s0 request makes exactly two s1 requests, served or dropped with it.
        expect(result.bySession.s1?.requests).toBe(2 * (result.bySession.s0?.requests ?? 0));
        expect(result.dropped).toBeGreaterThan(0);
      }
    }
  });

  it('invariants hold across re-plans, and the epoch rule re-plans soon after the load doubles but never within 10 s', () => {
    const sessions: Session[] = [
      { id: 'a', model: 'resnet50', sloMs: 100, rate: 900 },
      { id: 'b', model: 'inception4', sloMs: 200, rate: 500 },
      { id: 'c', model: 'ssd', sloMs: 400, rate: 60 },
    ];
    const batches: BatchRecord[] = [];
    const initial = squishyBinPacking(sessions, paperProfiles).nodes;
    const result = runSimulation({
      sessions: sessions.map((s) => ({ ...s, arrivals: { kind: 'poisson', rate: [{ fromMs: 0, rate: s.rate }, { fromMs: 45_000, rate: 2 * s.rate }] } })),
      profileOf: paperProfiles,
      plan: initial,
      drop: 'early',
      durationMs: 70_000,
      seed: 3,
      replan: {},
      onBatch: (b) => batches.push(b),
    });
    expectInvariants(result, batches, undefined, 'replan');
    expect(result.late).toBe(0);
    const at = result.plans.map((p) => p.atMs);
    expect(at[0]).toBe(0);
    at.slice(1).forEach((t, i) => expect(t - (at[i] as number)).toBeGreaterThanOrEqual(10_000));
    // A periodic epoch at 30 s. The load doubles at 45 s: the 10 s mean passes +30% after about
    // 3 s, which re-plans early; 10 s later the mean is the doubled load and the plan serves it.
    const early = result.plans.find((p) => p.atMs > 45_000);
    expect(early?.atMs).toBeGreaterThan(46_000);
    expect(early?.atMs).toBeLessThanOrEqual(50_000);
    const next = result.plans.find((p) => p.atMs > (early?.atMs ?? Infinity));
    const badAfter = result.perSecond.slice(Math.ceil((next?.atMs ?? Infinity) / 1000) + 1);
    expect(badAfter.reduce((sum, s) => sum + s.bad, 0) / badAfter.reduce((sum, s) => sum + s.requests, 0)).toBeLessThan(0.02);
  });

  it('routes a session over its nodes in proportion to the rate each serves', () => {
    const plan: GpuNode[] = [
      { id: 'gpu-0', dedicated: false, dutyCycleMs: 13, sessions: [{ id: 's', model: 'm', sloMs: 100, rate: 300, batch: 4 }] },
      { id: 'gpu-1', dedicated: false, dutyCycleMs: 13, sessions: [{ id: 's', model: 'm', sloMs: 100, rate: 100, batch: 4 }] },
    ];
    const served = new Map<string, number>();
    runSimulation({
      sessions: [{ id: 's', model: 'm', sloMs: 100, arrivals: { kind: 'uniform', rate: 200 } }],
      profileOf: small,
      plan,
      drop: 'early',
      durationMs: 10_000,
      seed: 1,
      onBatch: (b) => served.set(b.node, (served.get(b.node) ?? 0) + b.size),
    });
    expect(served.get('gpu-0')).toBe(1500);
    expect(served.get('gpu-1')).toBe(500);
  });

  it('early drop is never worse than lazy drop under Poisson overload (§2.6 setup)', () => {
    for (const rate of [400, 450, 500, 550]) {
      for (const seed of [1, 2]) {
        const early = section26Run('early', rate, seed);
        const lazy = section26Run('lazy', rate, seed);
        expect(early.badRate, `${rate} req/s seed ${seed}`).toBeLessThanOrEqual(lazy.badRate);
      }
    }
    // At 90% load lazy drop's small batches lose several times more requests.
    expect(section26Run('lazy', 450).badRate).toBeGreaterThan(3 * section26Run('early', 450).badRate);
  });

  it('is a pure function of its seed', () => {
    const config = (seed: number): SimulationConfig => ({
      sessions: [
        { id: 'a', model: 'resnet50', sloMs: 100, arrivals: { kind: 'poisson', rate: 800 }, children: [{ session: 'b', gamma: 0.7 }] },
        { id: 'b', model: 'inception4', sloMs: 100, arrivals: { kind: 'pareto', rate: 300 } },
      ],
      profileOf: paperProfiles,
      plan: squishyBinPacking(
        [
          { id: 'a', model: 'resnet50', sloMs: 100, rate: 800 },
          { id: 'b', model: 'inception4', sloMs: 100, rate: 860 },
        ],
        paperProfiles,
      ).nodes,
      drop: 'early',
      durationMs: 20_000,
      seed,
      replan: {},
    });
    const first = runSimulation(config(7));
    expect(runSimulation(config(7))).toEqual(first);
    expect(runSimulation(config(8))).not.toEqual(first);
  });

  it('rejects a plan or an edge naming an unknown session', () => {
    const sessions: SimSession[] = [{ id: 's', model: 'm', sloMs: 20, children: [{ session: 'nope', gamma: 1 }] }];
    const run = (s: SimSession[], plan: GpuNode[]): SimulationResult => runSimulation({ sessions: s, profileOf: small, plan, drop: 'early', durationMs: 10, seed: 1 });
    expect(() => run(sessions, [])).toThrow(expect.objectContaining({ code: ErrorCode.SchedulerInput }));
    expect(() => run([{ id: 'x', model: 'm', sloMs: 20 }], oneNode(20, 4))).toThrow(/unknown session "s"/);
  });
});

describe('arrival processes', () => {
  const count = (spec: ArrivalSpec, untilMs: number, fromMs = 0): number => {
    const next = arrivalStream(spec, 5);
    let n = 0;
    for (let t = next(); t < untilMs; t = next()) if (t >= fromMs) n++;
    return n;
  };

  it('uniform, Poisson, Pareto and Lomax arrivals have the mean rate; a rate schedule steps it', () => {
    expect(count({ kind: 'uniform', rate: 100 }, 100_000)).toBe(10_000);
    expect(count({ kind: 'poisson', rate: 100 }, 100_000)).toBeGreaterThan(9_700);
    expect(count({ kind: 'poisson', rate: 100 }, 100_000)).toBeLessThan(10_300);
    expect(count({ kind: 'pareto', rate: 100, shape: 2.5 }, 100_000)).toBeGreaterThan(9_500);
    expect(count({ kind: 'pareto', rate: 100, shape: 2.5 }, 100_000)).toBeLessThan(10_500);
    expect(count({ kind: 'lomax', rate: 100, shape: 2.5 }, 100_000)).toBeGreaterThan(9_500);
    expect(count({ kind: 'lomax', rate: 100, shape: 2.5 }, 100_000)).toBeLessThan(10_500);
    // At the edge-scheduling paper's 1.25 the variance is infinite: the mean holds only roughly.
    expect(count({ kind: 'lomax', rate: 100 }, 100_000)).toBeGreaterThan(8_000);
    expect(count({ kind: 'lomax', rate: 100 }, 100_000)).toBeLessThan(12_000);
    const steps = { kind: 'uniform', rate: [{ fromMs: 0, rate: 10 }, { fromMs: 10_000, rate: 0 }, { fromMs: 20_000, rate: 50 }] } as const;
    expect(count(steps, 10_000)).toBe(100);
    expect(count(steps, 20_000, 10_000)).toBe(0);
    expect(count(steps, 30_000, 20_000)).toBe(500);
  });

  it('a load scale moves the same arrivals closer together', () => {
    const a = arrivalStream({ kind: 'poisson', rate: 10 }, 9);
    const b = arrivalStream({ kind: 'poisson', rate: 20 }, 9);
    for (let i = 0; i < 100; i++) expect(b()).toBeCloseTo(a() / 2, 9);
  });
});

describe('max rate at 99% good', () => {
  it('bisects a load scale to the last good one', () => {
    const fake = (badRate: number): SimulationResult => ({ badRate }) as SimulationResult;
    expect(maxGoodLoad((s) => fake(s > 0.7 ? 0.5 : 0), { highScale: 1, steps: 20 })).toBeCloseTo(0.7, 5);
    expect(maxGoodLoad((s) => (s > 0.4 ? undefined : fake(0.005)), { highScale: 1, steps: 20 })).toBeCloseTo(0.4, 5);
    expect(maxGoodLoad(() => fake(0), { highScale: 1 })).toBe(1);
  });

  it('the §2.6 setup: early drop keeps 99% good at a higher Poisson rate than lazy drop', () => {
    const rate = (drop: DropPolicy): number => 500 * maxGoodLoad((s) => section26Run(drop, 500 * s), { highScale: 1, steps: 7 });
    expect(rate('early')).toBeGreaterThan(1.1 * rate('lazy'));
  });
});

describe('squishy bin packing vs batch-oblivious (Nexus Fig. 16)', () => {
  it('squishy serves at least as much at 99% good on every mix, past the load its plan fits on 8 GPUs too', () => {
    const { mixes } = squishyVsOblivious();
    for (const mix of mixes) expect(mix.ratio, mix.name).toBeGreaterThanOrEqual(1);
    // On one model at mixed SLOs the plan stops fitting below the oblivious plan's capacity: the rest is served past it.
    expect(mixes[0]!.squishyScale).toBeGreaterThan(mixes[0]!.obliviousScale);
  });
});

describe('experiments', () => {
  it('an unknown experiment is PANOPTES_SCHEDULER_INPUT naming the known ones', () => {
    let error: unknown;
    try {
      runExperiments(['fastest']);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PanoptesError);
    expect(error).toMatchObject({ code: ErrorCode.SchedulerInput });
    expect((error as Error).message).toContain('known: all, earlyDropVsLazy, squishyVsOblivious');
  });

  it('runs one experiment by name and returns only its figure', () => {
    const figures = runExperiments(['planning1000SessionsMs']);
    expect(Object.keys(figures)).toEqual(['planning1000SessionsMs']);
    expect(figures.planning1000SessionsMs).toBeGreaterThan(0);
    expect(figures.planning1000SessionsMs).toBeLessThan(1000);
  });
});

/** No node runs two batches at once; batches stay within the plan's batch; the counts add up. */
function expectInvariants(result: SimulationResult, batches: readonly BatchRecord[], plan: readonly GpuNode[] | undefined, label: string): void {
  const byNode = new Map<string, BatchRecord[]>();
  for (const b of batches) byNode.set(b.node, [...(byNode.get(b.node) ?? []), b]);
  for (const [node, runs] of byNode) {
    runs.forEach((b, i) => {
      const before = runs[i - 1];
      if (before) expect(b.startMs, `${label} ${node}`).toBeGreaterThanOrEqual(before.endMs);
      expect(b.endMs).toBeGreaterThan(b.startMs);
    });
  }
  if (plan) {
    const batchOf = new Map(plan.flatMap((n) => n.sessions.map((s) => [`${n.id}/${s.id}`, s.batch])));
    for (const b of batches) expect(b.size, label).toBeLessThanOrEqual(batchOf.get(`${b.node}/${b.session}`) ?? 0);
  }
  expect(result.good + result.late + result.dropped, label).toBe(result.requests);
  for (const [id, c] of Object.entries(result.bySession)) expect(c.good + c.late + c.dropped, `${label} ${id}`).toBe(c.requests);
  expect(batches.reduce((sum, b) => sum + b.size, 0), label).toBe(result.good + result.late);
  expect(result.perSecond.reduce((sum, s) => sum + s.requests, 0)).toBe(result.requests);
  expect(result.perSecond.reduce((sum, s) => sum + s.bad, 0)).toBe(result.late + result.dropped);
}
