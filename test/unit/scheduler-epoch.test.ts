import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryBus, planContract, silentLogger, statsContract, Topics, type Clock, type MemoryBus, type Plan, type Stats } from '../../core/index.js';
import { appDemands, countModelMoves, createEpochService, linearProfile, planEpoch, planViolations, profileLookup, type AppDemand } from '../../scheduler/index.js';
import { waitFor } from '../conformance/wait-for.js';

const profileOf = profileLookup([
  linearProfile({ model: 'detector', alphaMs: 5, betaMs: 20, maxBatch: 32 }),
  linearProfile({ model: 'reader', alphaMs: 1, betaMs: 5, maxBatch: 64 }),
]);

/** frames → detect (detector) → read (reader), 1 s end to end. */
const app = (name: string, framesRate: number, gamma = 2): AppDemand => ({
  app: name,
  sloMs: 1000,
  nodes: [
    { id: 'detect', model: 'detector' },
    { id: 'read', model: 'reader' },
  ],
  edges: [
    { from: 'frames', to: 'detect' },
    { from: 'detect', to: 'read' },
  ],
  framesRate,
  gammas: { 'detect>read': gamma },
});

const options = { epsilonMs: 50 };
const specializedProfiles = profileLookup([
  linearProfile({ model: 'detector', alphaMs: 5, betaMs: 20, maxBatch: 32 }),
  linearProfile({ model: 'reader', alphaMs: 1, betaMs: 5, maxBatch: 64 }),
  linearProfile({ model: 'lite', alphaMs: 0.2, betaMs: 2, maxBatch: 64 }),
]);

describe("the apps' load from the backends' stats", () => {
  /**
   * One stream's specialized `read` node: of `inputs` in the interval, the oracle ran on
   * `oracleCalls`, `afterLite` of them after the template `lite`, which ran on the rest.
   */
  const specialization = (source: string, inputs: number, oracleCalls: number, afterLite = 0) => ({
    app: 'north', node: 'read', source, phase: 'specialized', inputs: 500, specialized: 400, fellThrough: 40, transitions: 1, dominantSum: 3, windowSum: 30, oracleCalls: 150,
    intervalInputs: inputs, intervalOracleCalls: oracleCalls, intervalTemplateRuns: { lite: inputs - oracleCalls }, intervalCascadeOracleCalls: { lite: afterLite }, retrains: 1, retrainMs: 500,
  });
  const stats = (backend: string, framesRate: number, gamma: number, specializations: Stats['specializations'] = []): Stats => ({
    backend, fromMs: 0, toMs: 1000, sessions: [], edges: [{ app: 'north', from: 'detect', to: 'read', gamma }], apps: [{ app: 'north', framesRate }], specializations,
  });
  // The scheduler's graph of `read` specialized with the template `lite`: a node of its own, fed by read's parent and feeding read.
  const { sloMs, nodes, edges } = app('north', 0);
  const north = { app: 'north', sloMs, nodes: [...nodes, { id: 'read~lite', model: 'lite' }], edges: [...edges, { from: 'detect', to: 'read~lite' }, { from: 'read~lite', to: 'read' }] };

  it('sums frames and averages γ; the edges into a specialized node and its template carry the shares of the inputs each ran on', () => {
    expect(appDemands([north], [stats('b1', 10, 2), stats('b2', 5, 4)])[0]).toMatchObject({ framesRate: 15, gammas: { 'frames>detect': 1, 'detect>read': 3, 'detect>read~lite': 3, 'read~lite>read': 0 } });
    // Two streams: 20 of 100 inputs and 10 of 100 went to the oracle in the last interval (γ 3 × 0.15), the rest to the template (× 0.85).
    const [specialized] = appDemands([north], [stats('b1', 10, 2, [specialization('cam-1', 100, 20)]), stats('b2', 5, 4, [specialization('cam-2', 100, 10)])]);
    expect(specialized!.gammas['detect>read']).toBeCloseTo(0.45, 10);
    expect(specialized!.gammas['detect>read~lite']).toBeCloseTo(2.55, 10);
    // Of the oracle's 30 calls, 14 followed the template (fall-throughs, spot checks): they come in from the template, 14 per 170 of its runs.
    const [chained] = appDemands([north], [stats('b1', 10, 2, [specialization('cam-1', 100, 20, 8)]), stats('b2', 5, 4, [specialization('cam-2', 100, 10, 6)])]);
    expect(chained!.gammas['detect>read']).toBeCloseTo(3 * (16 / 200), 10);
    expect(chained!.gammas['read~lite>read']).toBeCloseTo(14 / 170, 10);
    // The oracle's rate over both of its inputs is still its 15% of read's inputs.
    expect(chained!.gammas['detect>read']! + chained!.gammas['detect>read~lite']! * chained!.gammas['read~lite>read']!).toBeCloseTo(0.45, 10);
    // Oracle calls after the template beyond its runs in the interval (a run and its call in two intervals) come in from the parent.
    const straddling = appDemands([north], [stats('b1', 10, 2, [{ ...specialization('cam-1', 100, 20, 8), intervalTemplateRuns: { lite: 5 } }])])[0]!.gammas;
    expect(straddling['read~lite>read']).toBe(1);
    expect(straddling['detect>read']).toBeCloseTo(2 * (15 / 100), 10);
    expect(straddling['detect>read']! + straddling['detect>read~lite']! * straddling['read~lite>read']!).toBeCloseTo(2 * 0.2, 10);
    // No input in the interval: nothing measured, each serves every input, the oracle straight from its parent.
    expect(appDemands([north], [stats('b1', 10, 2, [specialization('cam-1', 0, 0)])])[0]!.gammas).toMatchObject({ 'detect>read': 2, 'detect>read~lite': 2, 'read~lite>read': 0 });
  });

  it("plans the oracle's session for the inputs it serves, and the template's session beside it", () => {
    // 400 frames/s, 2 crops each. Every crop to the reader: batches of 64 on a backend of its
    // own. One in ten (the cascade answers the rest): batches of 8 (80 crops a second).
    const plan = (oracleCalls: number): Plan => planEpoch({ epoch: 1, nowMs: 0, apps: appDemands([north], [stats('b1', 400, 2, [specialization('cam-1', 100, oracleCalls)])]), backends: ['b1', 'b2', 'b3', 'b4'] }, specializedProfiles, options).plan;
    const sessionsOf = (p: Plan, model: string) => p.backends.flatMap((b) => b.sessions).filter((s) => s.session.startsWith(`${model}@`));
    expect(sessionsOf(plan(100), 'reader')).toEqual([{ session: 'reader@150', batch: 64 }]);
    const [reader] = sessionsOf(plan(10), 'reader');
    expect(reader!.batch).toBeLessThan(16);
    const lite = plan(10).sessions.find((s) => s.model === 'lite')!;
    expect(lite.nodes).toEqual([{ app: 'north', node: 'read~lite' }]);
    expect(sessionsOf(plan(10), 'lite').reduce((n, s) => n + s.batch, 0)).toBeGreaterThan(0);
  });
});

describe('planEpoch', () => {
  it('serves the same model under the same SLO from two apps as one session, routed by the rate each backend serves', () => {
    const { plan, state, warnings } = planEpoch({ epoch: 1, nowMs: 1000, apps: [app('north', 200), app('south', 200)], backends: ['b1', 'b2', 'b3', 'b4', 'b5', 'b6'] }, profileOf, options);
    expect(warnings).toEqual([]);
    const models = plan.sessions.map((s) => s.model).sort();
    expect(models).toEqual(['detector', 'reader']);

    const detector = plan.sessions.find((s) => s.model === 'detector')!;
    const reader = plan.sessions.find((s) => s.model === 'reader')!;
    expect(detector.sloMs + reader.sloMs).toBeLessThanOrEqual(1000);
    expect(detector.nodes).toEqual([{ app: 'north', node: 'detect' }, { app: 'south', node: 'detect' }]);
    expect(reader.nodes).toEqual([{ app: 'north', node: 'read' }, { app: 'south', node: 'read' }]);
    // Each session carries its profile's ℓ(b) (5b + 20 for the detector) and CPU time: backends drop early by the plan's numbers.
    expect(detector.latencyMs).toHaveLength(32);
    expect(detector.latencyMs!.slice(0, 3)).toEqual([25, 30, 35]);
    expect(detector.overheadMs).toBe(0);
    expect(plan.routing.filter((r) => r.session === detector.id).map((r) => r.topic)).toEqual([Topics.frames]);
    expect(plan.routing.filter((r) => r.session === reader.id).map((r) => r.topic)).toEqual([Topics.tasks('reader')]);
    for (const route of plan.routing) expect(Object.values(route.weights).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);

    // 400 frames/s to the detector and 800 crops/s to the reader, all placed within the rules.
    const served = (model: string): number => state.nodes.flatMap((n) => n.sessions).filter((s) => s.model === model).reduce((sum, s) => sum + s.rate, 0);
    expect(served('detector')).toBeCloseTo(400, 6);
    expect(served('reader')).toBeCloseTo(800, 6);
    const sessions = plan.sessions.map((s) => ({ ...s, rate: served(s.model) }));
    expect(planViolations({ nodes: [...state.nodes], unschedulable: [] }, sessions, profileOf)).toEqual([]);
    expect(new Set(plan.backends.map((b) => b.backend)).size).toBe(plan.backends.length);
  });

  it('keeps backends and models where they were when the load holds, and says when backends are short', () => {
    const first = planEpoch({ epoch: 1, nowMs: 0, apps: [app('north', 300)], backends: ['b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8'] }, profileOf, options);
    const second = planEpoch({ epoch: 2, nowMs: 30_000, apps: [app('north', 300)], backends: ['b8', 'b7', 'b6', 'b5', 'b4', 'b3', 'b2', 'b1'], previous: first.state }, profileOf, options);
    expect(countModelMoves(first.state.nodes, second.state.nodes)).toBe(0);
    expect(second.state.backendOf).toEqual(first.state.backendOf);

    const short = planEpoch({ epoch: 3, nowMs: 60_000, apps: [app('north', 300)], backends: ['b1'], previous: second.state }, profileOf, options);
    expect(short.plan.backends).toHaveLength(1);
    expect(short.warnings.join('\n')).toMatch(/the plan needs \d+ backends and 1 reported/);
  });

  it('splits evenly, and says so, when no split serves the load', () => {
    const tight = { ...app('tight', 50), sloMs: 60 };
    const { plan, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps: [tight], backends: ['b1', 'b2'] }, profileOf, { epsilonMs: 10 });
    expect(warnings.join('\n')).toMatch(/app tight: .*splitting evenly/);
    expect(plan.sessions.map((s) => s.sloMs)).toEqual([30, 30]);
    // The plan itself says so, for whoever reads it off the topic.
    expect(plan.warnings?.join('\n')).toMatch(/app tight: .*splitting evenly/);
    expect(planContract.decode(planContract.encode(plan)).warnings).toEqual(plan.warnings);
  });

  it('falls back to the even split, and says so, on a graph too large to search: a 30-node ladder of fan-ins', () => {
    // 15 rungs: a0 and b0 from frames, then each aᵢ and bᵢ fed by both aᵢ₋₁ and bᵢ₋₁.
    const ids = Array.from({ length: 15 }, (_, i) => [`a${i}`, `b${i}`]).flat();
    const ladder: AppDemand = {
      ...app('ladder', 10),
      sloMs: 3000,
      nodes: ids.map((id) => ({ id, model: 'reader' })),
      edges: ids.flatMap((id, i) => (i < 2 ? [{ from: 'frames', to: id }] : [{ from: ids[2 * Math.floor(i / 2) - 2]!, to: id }, { from: ids[2 * Math.floor(i / 2) - 1]!, to: id }])),
      gammas: {},
    };
    const { plan, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps: [ladder], backends: ['b1'] }, profileOf, options);
    expect(warnings.join('\n')).toMatch(/app ladder: query analysis failed \(.*28 of them with several parents.*\); splitting evenly/);
    // The longest path, frames → a0 → a1 → … → a14, has 15 stages: 3000/15 ms each.
    expect(new Set(plan.sessions.map((s) => s.sloMs))).toEqual(new Set([200]));
  });

  it('splits a fork-join app by query analysis, each path within the SLO, the joining stage at the rate of both inputs', () => {
    // frames → detect → {read, look} → read-again: the last reader runs on both branches' outputs.
    const forkJoin: AppDemand = {
      ...app('fork-join', 100),
      nodes: [
        { id: 'detect', model: 'detector' },
        { id: 'read', model: 'reader' },
        { id: 'look', model: 'reader' },
        { id: 'again', model: 'reader' },
      ],
      edges: [
        { from: 'frames', to: 'detect' },
        { from: 'detect', to: 'read' },
        { from: 'detect', to: 'look' },
        { from: 'read', to: 'again' },
        { from: 'look', to: 'again' },
      ],
      gammas: { 'detect>read': 2, 'detect>look': 1, 'read>again': 1, 'look>again': 1 },
    };
    const { plan, state, warnings } = planEpoch({ epoch: 1, nowMs: 0, apps: [forkJoin], backends: ['b1', 'b2', 'b3', 'b4'] }, profileOf, options);
    expect(warnings).toEqual([]);
    // The readers: read 200/s, look 100/s, and again 200 + 100 crops/s.
    const readers = state.nodes.flatMap((n) => n.sessions).filter((s) => s.model === 'reader');
    expect(readers.reduce((sum, s) => sum + s.rate, 0)).toBeCloseTo(600, 6);
    const budget = (node: string): number => plan.sessions.find((s) => s.nodes?.some((n) => n.node === node))!.sloMs;
    expect(budget('detect') + Math.max(budget('read'), budget('look')) + budget('again')).toBeLessThanOrEqual(1000);
    expect(plan.sessions.flatMap((s) => (s.nodes ?? []).map((n) => n.node)).sort()).toEqual(['again', 'detect', 'look', 'read']);
  });
});

/** A clock the test moves: sleepers wake when it passes their time. */
function manualClock(start = 1_700_000_000_000): Clock & { advance(ms: number): Promise<void> } {
  let now = start;
  let sleepers: { until: number; wake: () => void }[] = [];
  return {
    now: () => now,
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        sleepers.push({ until: now + ms, wake: resolve });
        signal?.addEventListener('abort', () => resolve(), { once: true });
      }),
    async advance(ms) {
      for (let step = 0; step < ms; step += 1000) {
        now += Math.min(1000, ms - step);
        const due = sleepers.filter((s) => s.until <= now);
        sleepers = sleepers.filter((s) => s.until > now);
        for (const s of due) s.wake();
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
  };
}

describe('the epoch service', () => {
  let bus: MemoryBus | undefined;
  afterEach(async () => {
    await bus?.close();
  });

  it('plans when backends report, at most every 10 s, early on a large change, else every 30 s', async () => {
    bus = createMemoryBus();
    await bus.createTopics([Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
    const clock = manualClock();
    const { sloMs, nodes, edges } = app('north', 0);
    const service = createEpochService({ bus, apps: [{ app: 'north', sloMs, nodes, edges }], profileOf, logger: silentLogger(), clock, epsilonMs: 50 });
    const plans: Plan[] = [];
    const reader = bus.consumer({ groupId: 'test', topics: [Topics.plan] });
    await reader.run(async (batch) => {
      plans.push(...batch.messages.map((m) => planContract.decode(m.value)));
    });
    const producer = bus.producer();
    const report = async (framesRate: number): Promise<void> => {
      const stats: Stats = { backend: 'b1', fromMs: clock.now() - 1000, toMs: clock.now(), sessions: [], edges: [{ app: 'north', from: 'detect', to: 'read', gamma: 2 }], apps: [{ app: 'north', framesRate }] };
      await producer.send(Topics.stats, [{ key: 'b1', value: statsContract.encode(stats) }]);
      // Taken in before the clock moves on, as a second of real time would allow.
      const b = bus!;
      await waitFor(async () => (await b.committed('panoptes.scheduler', Topics.stats))[0]?.offset === (await b.endOffsets(Topics.stats))[0]?.offset, 'the stats to be read');
    };

    await service.start();
    await clock.advance(3000);
    expect(plans).toEqual([]); // no backend yet
    await report(20);
    await clock.advance(1000);
    await waitFor(() => plans.length === 1, 'the first plan');
    expect(plans[0]?.backends.map((b) => b.backend)).toEqual(['b1']);

    await report(60); // tripled, but within 10 s of the last plan
    await clock.advance(5000);
    expect(plans).toHaveLength(1);
    await report(60);
    await clock.advance(5000);
    await waitFor(() => plans.length === 2, 'an early plan after 10 s');

    for (let s = 0; s < 28; s += 4) {
      await report(60);
      await clock.advance(4000);
    }
    expect(plans).toHaveLength(2); // steady load: nothing until the epoch
    await report(60);
    await clock.advance(4000);
    await waitFor(() => plans.length === 3, 'the plan at 30 s');
    expect(plans.map((p) => p.epoch)).toEqual([1, 2, 3]);
    expect(service.status()).toMatchObject({ state: 'running', epoch: 3, backends: ['b1'] });

    await producer.close();
    await service.close();
    await reader.close();
  });
});
