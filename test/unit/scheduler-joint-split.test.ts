import { describe, expect, it } from 'vitest';
import { analyzeQuery, efficiencyVsLowerBound, jointSplit, paperProfiles, planEpoch, sessionsOf, squishyBinPacking, type AppDemand, type AppQuery, type QuerySpec, type QuerySplit } from '../../scheduler/index.js';

const options = { epsilonMs: 10 };

/** frames → SSD → a recognizer (γ per detection), 400 ms end to end: shaped like the paper's traffic app. */
const query = (recognizer: string, gamma: number): QuerySpec => ({
  sloMs: 400,
  nodes: [
    { id: 'detect', model: 'ssd' },
    { id: 'recognize', model: recognizer },
  ],
  edges: [
    { from: 'frames', to: 'detect', gamma: 1 },
    { from: 'detect', to: 'recognize', gamma },
  ],
});

const appQuery = (spec: QuerySpec, framesRate: number): AppQuery => ({ query: spec, framesRate, split: analyzeQuery(spec, framesRate, paperProfiles, options), adjustable: true });
const gpus = (apps: readonly AppQuery[], splits: readonly QuerySplit[]): number =>
  squishyBinPacking(sessionsOf(apps.map((a, i) => ({ query: a.query, split: splits[i]! }))), paperProfiles).nodes.length;

describe('query analysis with bounds on budgets', () => {
  const spec = query('vgg-face', 1);

  it('a pinned node gets exactly its budget; a floor holds for every node', () => {
    const own = analyzeQuery(spec, 80, paperProfiles, options);
    expect(own.sloMs).toEqual({ detect: 360, recognize: 40 });
    const pinned = analyzeQuery(spec, 80, paperProfiles, { ...options, bounds: { detect: { minMs: 230, maxMs: 230 } } });
    expect(pinned.sloMs).toEqual({ detect: 230, recognize: 170 });
    expect(pinned.gpus).toBeGreaterThan(own.gpus);
    const floored = analyzeQuery(spec, 80, paperProfiles, { ...options, minStageMs: 100 });
    expect(floored.sloMs.recognize).toBeGreaterThanOrEqual(100);
    expect(floored.sloMs.detect! + floored.sloMs.recognize!).toBeLessThanOrEqual(400);
  });

  it('BAD CALL: bounds no split meets are PANOPTES_SCHEDULER_INPUT', () => {
    expect(() => analyzeQuery(spec, 80, paperProfiles, { ...options, minStageMs: 250 })).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
    expect(() => analyzeQuery(spec, 80, paperProfiles, { ...options, bounds: { detect: { minMs: 100, maxMs: 90 } } })).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
  });
});

describe('joint query analysis across apps', () => {
  it('two apps that give SSD different budgets: aligned at one, their sessions pack on a GPU fewer, every path within its SLO', () => {
    const apps = [appQuery(query('vgg-face', 1), 80), appQuery(query('inception4', 8), 80)];
    // Alone, each app's DP gives SSD its own budget: two SSD sessions, whose residuals cannot share a GPU.
    expect(apps.map((a) => a.split.sloMs.detect)).toEqual([360, 330]);
    const splits = jointSplit(apps, paperProfiles, options);
    expect(gpus(apps, splits)).toBe(gpus(apps, apps.map((a) => a.split)) - 1);
    expect(splits[0]!.sloMs.detect).toBe(splits[1]!.sloMs.detect);
    for (const split of splits) {
      expect(split.sloMs.detect! + split.sloMs.recognize!).toBeLessThanOrEqual(400);
      for (const ms of Object.values(split.sloMs)) expect(ms % options.epsilonMs).toBe(0);
    }
  });

  it('keeps the apps’ own splits where nothing saves a GPU, and a split it may not adjust', () => {
    const quiet = [appQuery(query('vgg-face', 1), 20), appQuery(query('inception4', 8), 20)];
    expect(jointSplit(quiet, paperProfiles, options)).toEqual(quiet.map((a) => a.split));
    const fixed = [appQuery(query('vgg-face', 1), 80), { ...appQuery(query('inception4', 8), 80), adjustable: false }];
    expect(jointSplit(fixed, paperProfiles, options)[1]).toBe(fixed[1]!.split);
  });

  it('stays with the last plan’s splits while they fit and the search saves no GPU on them; a split that no longer fits is dropped', () => {
    const apps = [appQuery(query('vgg-face', 1), 82), appQuery(query('inception4', 8), 82)];
    const joint = jointSplit(apps, paperProfiles, options);
    expect(joint.map((s) => s.sloMs)).toEqual([
      { detect: 230, recognize: 170 },
      { detect: 330, recognize: 70 },
    ]);
    // The last plan aligned both at 240 ms: as few GPUs, so the plan stays as it was.
    const previous = { detect: 240, recognize: 160 };
    const kept = jointSplit(apps.map((a) => ({ ...a, previous })), paperProfiles, options);
    expect(kept.map((s) => s.sloMs)).toEqual([previous, previous]);
    expect(gpus(apps, kept)).toBe(gpus(apps, joint));
    // Back to the apps' own splits where the last plan's no longer fit the SLO (and the search finds the GPU again).
    const stale = jointSplit(apps.map((a) => ({ ...a, previous: { detect: 390, recognize: 40 } })), paperProfiles, options);
    expect(gpus(apps, stale)).toBe(gpus(apps, joint));
    for (const split of stale) expect(split.sloMs.detect! + split.sloMs.recognize!).toBeLessThanOrEqual(400);
  });

  it("the epoch's plan uses the joint split: fewer backends for the same two apps", () => {
    const demand = (app: string, recognizer: string, gamma: number): AppDemand => ({
      app,
      sloMs: 400,
      nodes: query(recognizer, gamma).nodes,
      edges: query(recognizer, gamma).edges,
      framesRate: 80,
      gammas: { 'detect>recognize': gamma },
    });
    const backends = Array.from({ length: 8 }, (_, i) => `b${i}`);
    const { plan } = planEpoch({ epoch: 1, nowMs: 0, apps: [demand('faces', 'vgg-face', 1), demand('poses', 'inception4', 8)], backends }, paperProfiles, options);
    expect(plan.backends).toHaveLength(5);
    expect(plan.sessions.filter((s) => s.model === 'ssd')).toHaveLength(1);
    expect(plan.sessions.find((s) => s.model === 'ssd')!.nodes).toEqual([
      { app: 'faces', node: 'detect' },
      { app: 'poses', node: 'detect' },
    ]);
  });
});

describe("GPU efficiency on the paper's seven apps (Nexus §7.4)", () => {
  it('the joint split packs them on fewer GPUs than each app split alone, and no plan beats the split floor', () => {
    const figures = efficiencyVsLowerBound(1);
    expect(figures.gpus).toBeLessThan(figures.perAppGpus);
    expect(figures.gpus).toBeGreaterThanOrEqual(Math.ceil(figures.splitFloorGpus));
    expect(figures.badRate).toBeLessThan(0.01);
  });
});
