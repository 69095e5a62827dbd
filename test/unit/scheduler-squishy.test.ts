import { describe, expect, it } from 'vitest';
import { linearProfile, planViolations, profileLookup, squishyBinPacking, type GpuNode, type Session } from '../../scheduler/index.js';
import { TABLE_2, TABLE_2_SLO_MS } from './scheduler-fixtures.js';

const table2 = profileLookup(TABLE_2);
const session = (model: keyof typeof TABLE_2_SLO_MS, rate: number): Session => ({ id: model, model, sloMs: TABLE_2_SLO_MS[model], rate });
const summary = (nodes: readonly GpuNode[]): unknown[] =>
  nodes.map((n) => ({ dedicated: n.dedicated, dutyCycleMs: n.dutyCycleMs, sessions: n.sessions.map((s) => [s.id, s.batch, s.rate]) }));

describe('squishy bin packing: Nexus Table 2', () => {
  it('high load: whole GPUs at batch 16, 160 req/s for A and 128 req/s for B and C', () => {
    const sessions = [session('A', 800), session('B', 384), session('C', 640)];
    const { nodes, unschedulable } = squishyBinPacking(sessions, table2);
    expect(unschedulable).toEqual([]);
    const perModel = (model: string): GpuNode[] => nodes.filter((n) => n.sessions[0]?.model === model);
    expect(perModel('A')).toHaveLength(800 / 160);
    expect(perModel('B')).toHaveLength(384 / 128);
    expect(perModel('C')).toHaveLength(640 / 128);
    for (const node of nodes) {
      expect(node.dedicated).toBe(true);
      expect(node.sessions).toEqual([expect.objectContaining({ batch: 16, rate: node.sessions[0]?.model === 'A' ? 160 : 128 })]);
      expect(node.dutyCycleMs).toBe(node.sessions[0]?.model === 'A' ? 100 : 125);
    }
    expect(planViolations({ nodes, unschedulable }, sessions, table2)).toEqual([]);
  });

  it('low load (A 64, B 32, C 32 req/s): A and B share a GPU at d = 125 ms with batches 8 and 4; C does not', () => {
    const sessions = [session('A', 64), session('B', 32), session('C', 32)];
    const packing = squishyBinPacking(sessions, table2);
    expect(packing.nodes).toHaveLength(2);
    const [ab, c] = packing.nodes;
    expect(summary([ab as GpuNode])).toEqual([
      {
        dedicated: false,
        dutyCycleMs: 125,
        sessions: [
          ['A', 8, 64],
          ['B', 4, 32],
        ],
      },
    ]);
    expect(c?.sessions.map((s) => s.id)).toEqual(['C']);
    expect(planViolations(packing, sessions, table2)).toEqual([]);
  });

  it('high load with residuals: dedicated GPUs first, the rest packed like the low-load case', () => {
    const sessions = [session('A', 160 * 3 + 64), session('B', 128 * 2 + 32), session('C', 32)];
    const packing = squishyBinPacking(sessions, table2);
    expect(packing.nodes.filter((n) => n.dedicated)).toHaveLength(5);
    expect(summary(packing.nodes.filter((n) => !n.dedicated))).toEqual([
      {
        dedicated: false,
        dutyCycleMs: 125,
        sessions: [
          ['A', 8, 64],
          ['B', 4, 32],
        ],
      },
      // C alone: the largest batch with ℓ(b) + b/r ≤ 250 ms is 5 (ℓ(5) = 68.75 ms by interpolation).
      { dedicated: false, dutyCycleMs: 156.25, sessions: [['C', 5, 32]] },
    ]);
    expect(planViolations(packing, sessions, table2)).toEqual([]);
  });
});

describe('squishy bin packing: rules', () => {
  const profile = (maxBatch: number, memoryPerItemMB = 0): ReturnType<typeof linearProfile> =>
    linearProfile({ model: 'm', alphaMs: 2, betaMs: 10, maxBatch, memory: { baseMB: 500, perItemMB: memoryPerItemMB } });

  it('batches are integers: merging rounds r·d up', () => {
    const profileOf = profileLookup([profile(32)]);
    const sessions = [
      { id: 'a', model: 'm', sloMs: 100, rate: 70 },
      { id: 'b', model: 'm', sloMs: 150, rate: 33 },
    ];
    const packing = squishyBinPacking(sessions, profileOf);
    for (const s of packing.nodes.flatMap((n) => n.sessions)) expect(Number.isInteger(s.batch)).toBe(true);
    expect(planViolations(packing, sessions, profileOf)).toEqual([]);
  });

  it('nodes never hold more memory than the device', () => {
    const profileOf = profileLookup([profile(16, 20)]);
    const sessions = Array.from({ length: 6 }, (_, i) => ({ id: `s${i}`, model: 'm', sloMs: 300, rate: 5 }));
    const roomy = squishyBinPacking(sessions, profileOf);
    const tight = squishyBinPacking(sessions, profileOf, { deviceMemoryMB: 1100 });
    expect(roomy.nodes).toHaveLength(1);
    expect(tight.nodes).toHaveLength(3);
    expect(planViolations(tight, sessions, profileOf, { deviceMemoryMB: 1100 })).toEqual([]);
  });

  it('a residual whose occupancy would exceed 1 gets a GPU of its own at batch B', () => {
    // ℓ(b) = b + 10 ms, SLO 100 ms: B = 40 (2·50 ≤ 100), T = 800 req/s. At r = 796 req/s batch 40
    // misses ℓ(b) + b/r ≤ 100 (50 + 50.25), so the residual batch is 39 (49 + 48.99) and its
    // occupancy 49/48.99 is above 1: no duty cycle can hold it.
    const profileOf = profileLookup([linearProfile({ model: 'm', alphaMs: 1, betaMs: 10, maxBatch: 64 })]);
    const sessions = [{ id: 'a', model: 'm', sloMs: 100, rate: 796 }];
    const packing = squishyBinPacking(sessions, profileOf);
    expect(summary(packing.nodes)).toEqual([{ dedicated: true, dutyCycleMs: 50, sessions: [['a', 40, 796]] }]);
    expect(planViolations(packing, sessions, profileOf)).toEqual([]);
  });

  it('a rate too low to fill one request per SLO is visited every budget − ℓ(1) ms at batch 1', () => {
    const profileOf = profileLookup([profile(8)]);
    const sessions = [{ id: 'a', model: 'm', sloMs: 100, rate: 2 }];
    const packing = squishyBinPacking(sessions, profileOf);
    expect(summary(packing.nodes)).toEqual([{ dedicated: false, dutyCycleMs: 88, sessions: [['a', 1, 2]] }]);
    expect(planViolations(packing, sessions, profileOf)).toEqual([]);
  });

  it('pre- and post-processing come off the SLO before the GPU rules apply', () => {
    const withOverhead = { ...profile(32), preprocessMs: 12, postprocessMs: 8 };
    const profileOf = profileLookup([withOverhead]);
    const packing = squishyBinPacking([{ id: 'a', model: 'm', sloMs: 100, rate: 10_000 }], profileOf);
    // Budget 80 ms: B = 15 (2·40 ≤ 80), not 20.
    expect(packing.nodes[0]?.sessions[0]?.batch).toBe(15);
  });

  it('sessions no batch can serve are reported, not placed; rate 0 needs nothing', () => {
    const profileOf = profileLookup([profile(8)]);
    const sessions = [
      { id: 'tight', model: 'm', sloMs: 20, rate: 10 },
      { id: 'idle', model: 'm', sloMs: 100, rate: 0 },
    ];
    const packing = squishyBinPacking(sessions, profileOf);
    expect(packing.nodes).toEqual([]);
    expect(packing.unschedulable).toEqual([{ id: 'tight', reason: expect.stringContaining('2ℓ(b) ≤ 20 ms') }]);
    expect(planViolations(packing, sessions, profileOf)).toEqual([]);
  });

  it('BAD CALL: duplicate ids and bad rates are PANOPTES_SCHEDULER_INPUT; an unknown model is PANOPTES_PROFILE_NOT_FOUND', () => {
    const profileOf = profileLookup([profile(8)]);
    const a = { id: 'a', model: 'm', sloMs: 100, rate: 1 };
    expect(() => squishyBinPacking([a, a], profileOf)).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
    expect(() => squishyBinPacking([{ ...a, rate: -1 }], profileOf)).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
    expect(() => squishyBinPacking([{ ...a, rate: NaN }], profileOf)).toThrow(expect.objectContaining({ code: 'PANOPTES_SCHEDULER_INPUT' }));
    expect(() => squishyBinPacking([{ ...a, model: 'x' }], profileOf)).toThrow(
      expect.objectContaining({ code: 'PANOPTES_PROFILE_NOT_FOUND', details: { model: 'x', device: 'simulated' } }),
    );
  });
});
