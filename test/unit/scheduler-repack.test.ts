import { describe, expect, it } from 'vitest';
import {
  countModelMoves,
  linearProfile,
  planViolations,
  profileLookup,
  repack,
  squishyBinPacking,
  type GpuNode,
  type Session,
} from '../../scheduler/index.js';
import { randomWorkload, seededRandom, TABLE_2, TABLE_2_SLO_MS } from './scheduler-fixtures.js';

const table2 = profileLookup(TABLE_2);
const session = (model: keyof typeof TABLE_2_SLO_MS, rate: number): Session => ({ id: model, model, sloMs: TABLE_2_SLO_MS[model], rate });
const layout = (nodes: readonly GpuNode[]): Record<string, string[]> =>
  Object.fromEntries(nodes.map((n) => [n.id, n.sessions.map((s) => s.id).sort()]));

describe('incremental re-packing across epochs', () => {
  it('the same sessions give the same plan: nothing moves', () => {
    const sessions = [session('A', 160 * 2 + 64), session('B', 32), session('C', 32)];
    const before = squishyBinPacking(sessions, table2);
    const after = repack(before.nodes, sessions, table2);
    expect(after).toEqual(before);
    expect(countModelMoves(before.nodes, after.nodes)).toBe(0);
  });

  it('an overloaded node evicts its cheapest session, which is re-packed; the rest stays', () => {
    const before = squishyBinPacking([session('A', 64), session('B', 32), session('C', 32)], table2);
    expect(layout(before.nodes)).toEqual({ 'gpu-0': ['A', 'B'], 'gpu-1': ['C'] });
    // B at 40 req/s needs batch 5 (60 ms) in A's 125 ms cycle: 75 + 60 > 125. B has the lower
    // occupancy, so B leaves; it fits with C (d = 150 ms: 70 + 68.75 ms).
    const sessions = [session('A', 64), session('B', 40), session('C', 32)];
    const after = repack(before.nodes, sessions, table2);
    expect(layout(after.nodes)).toEqual({ 'gpu-0': ['A'], 'gpu-1': ['B', 'C'] });
    expect(countModelMoves(before.nodes, after.nodes)).toBe(1);
    expect(planViolations(after, sessions, table2)).toEqual([]);
  });

  it('when the load falls, the least-utilized node hands its sessions over and is released', () => {
    const profiles = ['x', 'y'].map((model) => linearProfile({ model, alphaMs: 1, betaMs: 10, maxBatch: 64 }));
    const profileOf = profileLookup(profiles);
    const x = { id: 'x', model: 'x', sloMs: 200, rate: 600 };
    const y = { id: 'y', model: 'y', sloMs: 200, rate: 400 };
    const before = squishyBinPacking([x, y], profileOf);
    expect(layout(before.nodes)).toEqual({ 'gpu-0': ['x'], 'gpu-1': ['y'] });
    const sessions = [{ ...x, rate: 200 }, y];
    const after = repack(before.nodes, sessions, profileOf);
    expect(layout(after.nodes)).toEqual({ 'gpu-1': ['x', 'y'] });
    expect(countModelMoves(before.nodes, after.nodes)).toBe(1);
    expect(planViolations(after, sessions, profileOf)).toEqual([]);
  });

  it('dedicated GPUs are kept while their session needs them; a session that left releases its nodes', () => {
    const before = squishyBinPacking([session('A', 160 * 3), session('B', 128 * 2)], table2);
    const after = repack(before.nodes, [session('A', 160 * 4)], table2);
    const kept = before.nodes.filter((n) => n.sessions[0]?.id === 'A').map((n) => n.id);
    expect(after.nodes.filter((n) => kept.includes(n.id))).toHaveLength(3);
    expect(after.nodes).toHaveLength(4);
    expect(countModelMoves(before.nodes, after.nodes)).toBe(1);
  });

  it('over 500 random epochs: valid plans, a third fewer moves than packing afresh, about as many GPUs', () => {
    const totals = { epochs: 0, movesIncremental: 0, movesAfresh: 0, gpusIncremental: 0, gpusAfresh: 0 };
    const problems: string[] = [];
    for (let seed = 1; seed <= 500; seed++) {
      const random = seededRandom(seed);
      const { sessions, profileOf, deviceMemoryMB } = randomWorkload(random, {
        sessions: 5 + Math.floor(random() * 40),
        models: 2 + Math.floor(random() * 10),
        monotone: seed % 4 !== 0,
        withOverhead: true,
        rateOfPeak: () => Math.exp(Math.log(0.02) + random() * Math.log(150)),
      });
      const options = { deviceMemoryMB };
      const before = squishyBinPacking(sessions, profileOf, options);
      // Next epoch: every rate moves by up to ±10%, a tenth of the sessions leave.
      const next = sessions.filter(() => random() > 0.1).map((s) => ({ ...s, rate: s.rate * (0.9 + 0.2 * random()) }));
      const incremental = repack(before.nodes, next, profileOf, options);
      const afresh = squishyBinPacking(next, profileOf, options);
      problems.push(...planViolations(incremental, next, profileOf, options).map((p) => `seed ${seed}: ${p}`));
      totals.epochs++;
      totals.movesIncremental += countModelMoves(before.nodes, incremental.nodes);
      totals.movesAfresh += countModelMoves(before.nodes, matchIds(before.nodes, afresh.nodes));
      totals.gpusIncremental += incremental.nodes.length;
      totals.gpusAfresh += afresh.nodes.length;
    }
    console.log(`repack vs packing afresh: ${JSON.stringify(totals)}`);
    expect(problems).toEqual([]);
    expect(totals.movesIncremental).toBeLessThan(totals.movesAfresh * 0.75);
    expect(totals.gpusIncremental).toBeLessThan(totals.gpusAfresh * 1.05);
  });
});

/**
 * Gives packing afresh its best case: each new node takes the id of the unclaimed previous node
 * it shares the most models with (greedy), so its moves are not inflated by arbitrary ids.
 */
function matchIds(previous: readonly GpuNode[], next: readonly GpuNode[]): GpuNode[] {
  const unclaimed = new Map(previous.map((n) => [n.id, new Set(n.sessions.map((s) => s.model))]));
  const renamed = next.map((node) => {
    let best: string | undefined;
    let bestShared = 0;
    for (const [id, models] of unclaimed) {
      const shared = node.sessions.filter((s) => models.has(s.model)).length;
      if (shared > bestShared) [best, bestShared] = [id, shared];
    }
    if (best) unclaimed.delete(best);
    return { ...node, id: best ?? `new-${node.id}` };
  });
  return renamed;
}
