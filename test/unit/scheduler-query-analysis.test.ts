import { describe, expect, it } from 'vitest';
import {
  analyzeQuery,
  fanInNodes,
  evenSloSplit,
  linearProfile,
  profileLookup,
  queryGpus,
  type BatchProfile,
  type QuerySpec,
} from '../../scheduler/index.js';
import { seededRandom } from './scheduler-fixtures.js';

/**
 * Nexus Fig. 3: X serves 200 / 250 / 300 req/s and Y 300 / 400 / 500 req/s on one GPU under
 * 40 / 50 / 60 ms. With the packer's rule 2ℓ(B) ≤ SLO these are batches whose latency is at
 * most half the budget: X 4 @ 20 ms, 6 @ 24 ms, 9 @ 30 ms; Y 6 @ 20 ms, 10 @ 25 ms, 15 @ 30 ms.
 */
const measured = (model: string, points: readonly (readonly [number, number])[]): BatchProfile => ({
  version: 1,
  model,
  device: 'fig3',
  batches: points.map(([batch, latencyMs]) => ({ batch, latencyMs, stdMs: 0, memoryMB: 0 })),
});
const fig3 = profileLookup([
  measured('X', [
    [4, 20],
    [6, 24],
    [9, 30],
  ]),
  measured('Y', [
    [6, 20],
    [10, 25],
    [15, 30],
  ]),
]);
const xThenY = (gamma: number): QuerySpec => ({
  sloMs: 100,
  nodes: [
    { id: 'x', model: 'X' },
    { id: 'y', model: 'Y' },
  ],
  edges: [
    { from: 'frames', to: 'x', gamma: 1 },
    { from: 'x', to: 'y', gamma },
  ],
});
/** Requests of X served per GPU: Fig. 4's "average throughput". */
const perGpu = (gpus: number, framesRate: number): number => Number((framesRate / gpus).toFixed(1));

describe('query analysis: Nexus Fig. 4', () => {
  const framesRate = 1000;

  it('the split table: average throughput 1 / (1/T_X + γ/T_Y) for each split and γ', () => {
    const table = [
      [40, 60],
      [50, 50],
      [60, 40],
    ].map(([x, y]) =>
      [0.1, 1, 10].map((gamma) => perGpu(queryGpus(xThenY(gamma), framesRate, { x: x as number, y: y as number }, fig3), framesRate)),
    );
    expect(table).toEqual([
      [192.3, 142.9, 40.0],
      [235.3, 153.8, 34.5],
      [272.7, 150.0, 27.3],
    ]);
  });

  it.each([
    [0.1, { x: 60, y: 40 }, 272.7],
    [1, { x: 50, y: 50 }, 153.8],
    [10, { x: 40, y: 60 }, 40.0],
  ])('γ = %s: the DP picks the winning split %o at %s req/s', (gamma, split, throughput) => {
    const result = analyzeQuery(xThenY(gamma), framesRate, fig3, { epsilonMs: 10 });
    expect(result.sloMs).toEqual(split);
    expect(result.rates).toEqual({ x: framesRate, y: framesRate * gamma });
    expect(perGpu(result.gpus, framesRate)).toBe(throughput);
  });

  it('the even split is the DP only at γ = 1; at γ = 0.1 and 10 it needs more GPUs', () => {
    const ratios = [0.1, 1, 10].map((gamma) => {
      const query = xThenY(gamma);
      const even = queryGpus(query, framesRate, evenSloSplit(query), fig3);
      return Number((even / analyzeQuery(query, framesRate, fig3, { epsilonMs: 10 }).gpus).toFixed(3));
    });
    expect(ratios).toEqual([1.159, 1, 1.16]);
  });
});

describe('query analysis: trees', () => {
  const profiles = profileLookup([
    linearProfile({ model: 'ssd', alphaMs: 16.4, betaMs: 35, maxBatch: 16 }),
    linearProfile({ model: 'car', alphaMs: 0.5, betaMs: 4, maxBatch: 64 }),
    linearProfile({ model: 'face', alphaMs: 1, betaMs: 6, maxBatch: 64 }),
  ]);

  it('siblings share what their parent leaves; leaves take all of it', () => {
    const traffic: QuerySpec = {
      sloMs: 400,
      nodes: [
        { id: 'detect', model: 'ssd' },
        { id: 'cars', model: 'car' },
        { id: 'faces', model: 'face' },
      ],
      edges: [
        { from: 'frames', to: 'detect', gamma: 1 },
        { from: 'detect', to: 'cars', gamma: 3 },
        { from: 'detect', to: 'faces', gamma: 0.5 },
      ],
    };
    const { sloMs, rates } = analyzeQuery(traffic, 20, profiles, { epsilonMs: 5 });
    expect(rates).toEqual({ detect: 20, cars: 60, faces: 10 });
    expect(sloMs.cars).toBe(400 - (sloMs.detect ?? 0));
    expect(sloMs.faces).toBe(sloMs.cars);
    // Detection is the costly stage, so it gets most of the budget (the paper: 345 of 400 ms).
    expect(sloMs.detect).toBeGreaterThan(300);
  });

  it('models fed straight from frames each get the whole SLO', () => {
    const game: QuerySpec = {
      sloMs: 50,
      nodes: [
        { id: 'digits', model: 'car' },
        { id: 'icon', model: 'face' },
      ],
      edges: [
        { from: 'frames', to: 'digits', gamma: 6 },
        { from: 'frames', to: 'icon', gamma: 1 },
      ],
    };
    expect(analyzeQuery(game, 100, profiles, { epsilonMs: 1 }).sloMs).toEqual({ digits: 50, icon: 50 });
  });

  it('matches an exhaustive search over every split of random chains of up to 3 models', () => {
    const models = ['ssd', 'car', 'face'];
    for (let seed = 1; seed <= 100; seed++) {
      const random = seededRandom(seed);
      const length = 2 + Math.floor(random() * 2);
      const ids = Array.from({ length }, (_, i) => `n${i}`);
      const query: QuerySpec = {
        sloMs: 200 + Math.round(random() * 200),
        nodes: ids.map((id) => ({ id, model: models[Math.floor(random() * models.length)] as string })),
        edges: ids.map((id, i) => ({ from: i === 0 ? 'frames' : (ids[i - 1] as string), to: id, gamma: 0.1 + 5 * random() })),
      };
      const epsilonMs = 10;
      const steps = Math.floor(query.sloMs / epsilonMs);
      let best = Infinity;
      const search = (i: number, left: number, split: Record<string, number>): void => {
        if (i === length) {
          best = Math.min(best, queryGpus(query, 30, split, profiles));
          return;
        }
        for (let k = 1; k <= left; k++) search(i + 1, left - k, { ...split, [ids[i] as string]: k * epsilonMs });
      };
      search(0, steps, {});
      if (!Number.isFinite(best)) continue;
      expect(analyzeQuery(query, 30, profiles, { epsilonMs }).gpus, `seed ${seed}`).toBeCloseTo(best, 9);
    }
  });

  it('BAD CALL: an unknown node, a cycle, a node not reached, an SLO no split meets are PANOPTES_SCHEDULER_INPUT', () => {
    const base: QuerySpec = {
      sloMs: 400,
      nodes: [
        { id: 'a', model: 'car' },
        { id: 'b', model: 'car' },
        { id: 'c', model: 'face' },
      ],
      edges: [
        { from: 'frames', to: 'a', gamma: 1 },
        { from: 'frames', to: 'b', gamma: 1 },
        { from: 'a', to: 'c', gamma: 1 },
      ],
    };
    const invalid = { code: 'PANOPTES_SCHEDULER_INPUT' };
    const run = (query: QuerySpec) => () => analyzeQuery(query, 10, profiles, { epsilonMs: 10 });
    expect(run({ ...base, edges: [...base.edges, { from: 'z', to: 'c', gamma: 1 }] })).toThrow(expect.objectContaining(invalid));
    expect(run({ ...base, edges: [...base.edges, { from: 'c', to: 'a', gamma: 1 }] })).toThrow(expect.objectContaining({ ...invalid, message: expect.stringContaining('cycle') }));
    expect(run({ ...base, nodes: [...base.nodes, { id: 'lonely', model: 'car' }] })).toThrow(expect.objectContaining(invalid));
    expect(run({ ...base, sloMs: 15 })).toThrow(expect.objectContaining(invalid));
  });
});

describe('query analysis: fan-in and fork-join', () => {
  const profiles = profileLookup([
    linearProfile({ model: 'ssd', alphaMs: 16.4, betaMs: 35, maxBatch: 16 }),
    linearProfile({ model: 'car', alphaMs: 0.5, betaMs: 4, maxBatch: 64 }),
    linearProfile({ model: 'face', alphaMs: 1, betaMs: 6, maxBatch: 64 }),
  ]);

  it('fork-join: the node with two parents starts when the later one is done, and runs on the inputs of both', () => {
    // detect → {cars, faces} → report: report's budget begins where the longer of its parents' paths ends.
    const forkJoin: QuerySpec = {
      sloMs: 400,
      nodes: [
        { id: 'detect', model: 'ssd' },
        { id: 'cars', model: 'car' },
        { id: 'faces', model: 'face' },
        { id: 'report', model: 'face' },
      ],
      edges: [
        { from: 'frames', to: 'detect', gamma: 1 },
        { from: 'detect', to: 'cars', gamma: 3 },
        { from: 'detect', to: 'faces', gamma: 0.5 },
        { from: 'cars', to: 'report', gamma: 1 },
        { from: 'faces', to: 'report', gamma: 2 },
      ],
    };
    const { sloMs, rates, gpus } = analyzeQuery(forkJoin, 20, profiles, { epsilonMs: 10 });
    expect(rates).toEqual({ detect: 20, cars: 60, faces: 10, report: 60 + 20 });
    const path = (...ids: string[]) => ids.reduce((sum, id) => sum + (sloMs[id] ?? 0), 0);
    expect(path('detect', 'cars', 'report')).toBeLessThanOrEqual(400);
    expect(path('detect', 'faces', 'report')).toBeLessThanOrEqual(400);
    expect(Math.max(path('detect', 'cars', 'report'), path('detect', 'faces', 'report'))).toBe(400);
    expect(gpus).toBeCloseTo(queryGpus(forkJoin, 20, sloMs, profiles), 12);
    expect(gpus).toBeLessThan(queryGpus(forkJoin, 20, evenSloSplit(forkJoin), profiles));
  });

  it('matches an exhaustive search over every split of random DAGs of up to 4 models with fan-in', () => {
    const models = ['ssd', 'car', 'face'];
    let withFanIn = 0;
    let compared = 0;
    for (let seed = 1; seed <= 150; seed++) {
      const random = seededRandom(seed);
      const ids = Array.from({ length: 3 + Math.floor(random() * 2) }, (_, i) => `n${i}`);
      // Each node after the first has one or two parents among the nodes before it (or frames).
      const edges = ids.flatMap((id, i) => {
        const candidates = ['frames', ...ids.slice(0, i)];
        const pick = () => candidates[Math.floor(random() * candidates.length)] as string;
        const parents = new Set([i === 0 ? 'frames' : pick(), ...(i > 0 && random() < 0.6 ? [pick()] : [])]);
        return [...parents].map((from) => ({ from, to: id, gamma: 0.2 + 3 * random() }));
      });
      const query: QuerySpec = {
        sloMs: 150 + Math.round(random() * 150),
        nodes: ids.map((id) => ({ id, model: models[Math.floor(random() * models.length)] as string })),
        edges,
      };
      const epsilonMs = 25;
      const steps = Math.floor(query.sloMs / epsilonMs);
      const paths = (to: string): string[][] =>
        edges.filter((e) => e.to === to).flatMap((e) => (e.from === 'frames' ? [[to]] : paths(e.from).map((p) => [...p, to])));
      const allPaths = ids.flatMap(paths);
      let best = Infinity;
      const search = (i: number, split: Record<string, number>): void => {
        if (i === ids.length) {
          if (allPaths.every((p) => p.reduce((sum, id) => sum + (split[id] ?? 0), 0) <= query.sloMs)) best = Math.min(best, queryGpus(query, 30, split, profiles));
          return;
        }
        for (let k = 1; k <= steps; k++) search(i + 1, { ...split, [ids[i] as string]: k * epsilonMs });
      };
      search(0, {});
      if (!Number.isFinite(best)) continue;
      const split = analyzeQuery(query, 30, profiles, { epsilonMs });
      expect(split.gpus, `seed ${seed}`).toBeCloseTo(best, 9);
      compared += 1;
      if (edges.length > ids.length) withFanIn += 1;
      expect(allPaths.every((p) => p.reduce((sum, id) => sum + (split.sloMs[id] ?? 0), 0) <= query.sloMs), `seed ${seed}`).toBe(true);
    }
    expect(compared).toBeGreaterThan(100);
    expect(withFanIn).toBeGreaterThan(40);
  });

  it("a parent that is an ancestor of the node's other parent bounds nothing: a specialized node's split costs what a chain's does", () => {
    // vehicles → kind~lite → kind and vehicles → kind: the template runs before the oracle.
    const specialized: QuerySpec = {
      sloMs: 400,
      nodes: [
        { id: 'vehicles', model: 'ssd' },
        { id: 'kind', model: 'face' },
        { id: 'kind~lite', model: 'car' },
      ],
      edges: [
        { from: 'frames', to: 'vehicles', gamma: 1 },
        { from: 'vehicles', to: 'kind', gamma: 0.5 },
        { from: 'vehicles', to: 'kind~lite', gamma: 2.5 },
        { from: 'kind~lite', to: 'kind', gamma: 0.2 },
      ],
    };
    expect(fanInNodes(specialized)).toEqual([]);
    const chain: QuerySpec = { ...specialized, edges: specialized.edges.filter((e) => !(e.from === 'vehicles' && e.to === 'kind')).map((e) => (e.to === 'kind' ? { ...e, gamma: 0.2 + 0.5 / 2.5 } : e)) };
    const split = analyzeQuery(specialized, 20, profiles, { epsilonMs: 10 });
    expect(split.rates).toEqual({ vehicles: 20, 'kind~lite': 50, kind: 10 + 10 });
    expect(split).toEqual(analyzeQuery(chain, 20, profiles, { epsilonMs: 10 }));
    expect(split.sloMs.vehicles! + split.sloMs['kind~lite']! + split.sloMs.kind!).toBe(400);
  });

  it('too many fan-in nodes for the exact search is PANOPTES_SCHEDULER_INPUT, which the epoch turns into the even split with a warning', () => {
    // A ladder: a0 and b0 from frames, then each aᵢ and bᵢ fed by both aᵢ₋₁ and bᵢ₋₁.
    const ids = Array.from({ length: 4 }, (_, i) => [`a${i}`, `b${i}`]).flat();
    const query: QuerySpec = {
      sloMs: 1000,
      nodes: ids.map((id) => ({ id, model: 'car' })),
      edges: ids.flatMap((id, i) => (i < 2 ? [{ from: 'frames', to: id, gamma: 1 }] : [{ from: ids[2 * Math.floor(i / 2) - 2] as string, to: id, gamma: 1 }, { from: ids[2 * Math.floor(i / 2) - 1] as string, to: id, gamma: 1 }])),
    };
    expect(fanInNodes(query)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    expect(() => analyzeQuery(query, 10, profiles, { epsilonMs: 1 })).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT', message: expect.stringMatching(/6 of them with several parents .* raise epsilonMs/) }));
  });
});
