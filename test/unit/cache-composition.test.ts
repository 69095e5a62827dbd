import { describe, expect, it } from 'vitest';
import {
  composeCaches,
  effectiveHitRates,
  expectedAccuracy,
  expectedLatency,
  greedyComposition,
  latencyGain,
  solveComposition,
  violation,
  type CacheVariant,
  type CompositionProblem,
} from '../../analyzers/cache/index.js';
import { seededRandom } from '../../core/index.js';

const MB = 1e6;
/** Table 4 (ResNet-18 on CIFAR-10, CPU): blocks 3 and 6 are layers 2 and 5 of 8 blocks. */
const table4: CacheVariant[] = [
  { layer: 2, name: 'FC(1024)', accuracy: 0.973, hitRate: 0.388, lookupMs: 6.08, memoryBytes: 268 * MB },
  { layer: 2, name: 'Pool(8192)', accuracy: 0.967, hitRate: 0.341, lookupMs: 1.32, memoryBytes: 33 * MB },
  { layer: 2, name: 'Conv(3,1)', accuracy: 0.962, hitRate: 0.204, lookupMs: 1.66, memoryBytes: 2 * MB },
  { layer: 5, name: 'FC(1024)', accuracy: 0.995, hitRate: 0.629, lookupMs: 2.94, memoryBytes: 134 * MB },
  { layer: 5, name: 'Pool(8192)', accuracy: 0.962, hitRate: 0.544, lookupMs: 0.64, memoryBytes: 33 * MB },
  { layer: 5, name: 'Conv(3,1)', accuracy: 0.993, hitRate: 0.494, lookupMs: 0.68, memoryBytes: 0.8 * MB },
];
/** The paper gives no per-block times: 8 even blocks of the base's ≈ 27.6 ms on CPU (Table 6: 16.04 ms at 1.72×). */
const blocks = Array.from({ length: 8 }, () => 27.6 / 8);
const named = (c: { variants: readonly CacheVariant[] }): string[] => c.variants.map((v) => `${v.name}@${v.layer}`);

describe('GATI composition', () => {
  it("reproduces the paper's toy example, with its numbers mended: Pool@3 + FC@6 beats FC@3 alone", () => {
    // The example ignores the 97% filter (Pool(8192)@3 is 96.7%) and its 564 MB budget fits
    // FC@3 + FC@6; mended: a 96.5% target (Pool(8192)@3 passes, the 96.2% variants do not) and a
    // 300 MB budget, which FC@3 + FC@6 (402 MB) exceeds.
    const problem: CompositionProblem = { segmentMs: blocks, variants: table4, memoryBudgetBytes: 300 * MB, accuracyTarget: 0.965 };
    const option1 = [table4[0]!];
    const option2 = [table4[1]!, table4[3]!];
    // 34.1% hit at block 3, 28.8% more at block 6, 37.1% run the whole model.
    expect(effectiveHitRates(option2).map((h) => Number(h.toFixed(3)))).toEqual([0.341, 0.288]);
    expect(1 - effectiveHitRates(option2).reduce((a, b) => a + b)).toBeCloseTo(0.371, 6);
    expect(expectedLatency(blocks, option1)).toBeCloseTo(0.388 * (3 * 3.45 + 6.08) + 0.612 * 27.6, 9);
    expect(expectedLatency(blocks, option2)).toBeLessThan(expectedLatency(blocks, option1));
    expect(expectedAccuracy(option2)).toBeCloseTo(0.341 * 0.967 + 0.288 * 0.995 + 0.371, 9);

    const chosen = composeCaches(problem);
    expect(named(chosen)).toEqual(['Pool(8192)@2', 'FC(1024)@5']);
    expect(chosen.expectedMs).toBeCloseTo(expectedLatency(blocks, option2), 9);
    // Both baselines are feasible; latency-greedy takes Conv@6 after Pool@3 and is slower.
    const byLatency = greedyComposition(problem, 'latency');
    const byHits = greedyComposition(problem, 'hit-rate');
    expect(named(byLatency)).toEqual(['Pool(8192)@2', 'Conv(3,1)@5']);
    expect(byLatency.expectedMs).toBeGreaterThan(chosen.expectedMs);
    expect(byHits.expectedMs).toBeGreaterThanOrEqual(chosen.expectedMs);
    for (const c of [byLatency, byHits]) expect(violation(problem, c.variants)).toBeUndefined();
  });

  it('never enables a variant below the accuracy target', () => {
    const chosen = composeCaches({ segmentMs: blocks, variants: table4, memoryBudgetBytes: 1000 * MB });
    expect(chosen.variants.length).toBeGreaterThan(0);
    for (const v of chosen.variants) expect(v.accuracy).toBeGreaterThanOrEqual(0.97);
    for (const c of chosen.sweep) expect(c.variants.every((v) => v.accuracy >= 0.97)).toBe(true);
    expect(violation({ segmentMs: blocks, variants: table4, memoryBudgetBytes: 1000 * MB }, [table4[1]!])).toMatch(/Pool\(8192\) at layer 2 is 0.967 accurate, below 0.97/);
  });

  it('never enables a variant whose precision rests on fewer than ten held-out hits, however high', () => {
    // Layer 5's FC(1024), chosen on Table 4's figures, measured on only 3 hits.
    const withHits = (few: number) => table4.map((v) => ({ ...v, hits: v.layer === 5 && v.name === 'FC(1024)' ? few : 40 }));
    const problem = { segmentMs: blocks, variants: withHits(3), memoryBudgetBytes: 1000 * MB };
    expect(named(composeCaches({ ...problem, variants: withHits(10) }))).toContain('FC(1024)@5');
    expect(named(composeCaches(problem))).not.toContain('FC(1024)@5');
    expect(violation(problem, [problem.variants[3]!])).toBe('FC(1024) at layer 5 had 3 hits among its held-out requests, too few to vouch for its precision');
    // A small exploration (12 held out) vouches with half of them: 6 hits, not 5.
    const small = (hits: number) => ({ ...problem, variants: table4.map((v) => ({ ...v, hits: v.layer === 5 && v.name === 'FC(1024)' ? hits : 12, heldOut: 12 })) });
    expect(named(composeCaches(small(6)))).toContain('FC(1024)@5');
    expect(violation(small(5), [small(5).variants[3]!])).toBe('FC(1024) at layer 5 had 5 hits among 12 held-out requests, too few to vouch for its precision');
  });

  it('keeps to a tiny memory budget with small Pool and Conv variants only', () => {
    const chosen = composeCaches({ segmentMs: blocks, variants: table4, memoryBudgetBytes: 5 * MB, accuracyTarget: 0.96 });
    expect(named(chosen)).toEqual(['Conv(3,1)@2', 'Conv(3,1)@5']);
    expect(chosen.variants.reduce((m, v) => m + v.memoryBytes, 0)).toBeLessThanOrEqual(5 * MB);
  });

  it('keeps one lookup in flight: a lookup slower than the segments to the next cached layer is not paired with it', () => {
    const segmentMs = [2, 1, 1, 4];
    const slow: CacheVariant = { layer: 0, name: 'slow', accuracy: 1, hitRate: 0.5, lookupMs: 1.5, memoryBytes: 1 };
    const next: CacheVariant = { layer: 1, name: 'next', accuracy: 1, hitRate: 0.6, lookupMs: 0.1, memoryBytes: 1 };
    const problem = { segmentMs, variants: [slow, next], memoryBudgetBytes: 10 };
    expect(violation(problem, [slow, next])).toMatch(/slow at layer 0 takes 1.5 ms, longer than the base model takes to the next cached layer/);
    expect(violation(problem, [slow])).toBeUndefined();
    for (const alpha of [0, 0.5, 1]) expect(solveComposition(problem, alpha).variants).toHaveLength(1);
    // A lookup on the last segment's output would answer after the model.
    expect(violation(problem, [{ ...next, layer: 3 }])).toMatch(/reads layer 3/);
  });

  it('charges a stop at each cached layer a request passes, and leaves out a layer whose hits do not pay for it', () => {
    const segmentMs = [5, 5, 5, 5];
    const early: CacheVariant = { layer: 0, name: 'early', accuracy: 1, hitRate: 0.4, lookupMs: 0.5, memoryBytes: 1 };
    const late: CacheVariant = { layer: 2, name: 'late', accuracy: 1, hitRate: 0.42, lookupMs: 0.5, memoryBytes: 1 };
    // A hit at the first cached layer made one run of the base, at the second two; a miss three.
    expect(expectedLatency(segmentMs, [early, late], 1)).toBeCloseTo(0.4 * (5 + 1 + 0.5) + 0.02 * (15 + 2 + 0.5) + 0.58 * (20 + 3), 9);
    expect(expectedLatency(segmentMs, [], 1)).toBe(21);
    expect(expectedLatency(segmentMs, [early, late], 0)).toBeCloseTo(expectedLatency(segmentMs, [early, late]), 9);
    // Without stops (the paper's Eq. 10) the late cache's 2% more hits pay; at 1 ms a stop they do not.
    const problem: CompositionProblem = { segmentMs, variants: [early, late], memoryBudgetBytes: 10 };
    expect(named(composeCaches(problem))).toEqual(['early@0', 'late@2']);
    const stopping = composeCaches({ ...problem, stopMs: 1 });
    expect(named(stopping)).toEqual(['early@0']);
    expect(stopping.expectedMs).toBeCloseTo(0.4 * 6.5 + 0.6 * 22, 9);
    // Every α's ILP still takes both: the subset is what leaves the late one out.
    for (const c of stopping.sweep) expect(named(c)).toEqual(['early@0', 'late@2']);
  });

  it('solves the ILP exactly: the same score as every feasible choice tried, on random instances, and feasible', () => {
    const random = seededRandom(11);
    let compared = 0;
    for (let instance = 0; instance < 120; instance++) {
      const layers = 3 + Math.floor(random() * 4);
      const segmentMs = Array.from({ length: layers }, () => 0.5 + random() * 5);
      const variants: CacheVariant[] = Array.from({ length: 2 + Math.floor(random() * 8) }, (_, i) => ({
        layer: Math.floor(random() * (layers - 1)),
        name: `v${i}`,
        accuracy: 0.95 + random() * 0.05,
        hitRate: random(),
        lookupMs: random() * 4,
        memoryBytes: Math.floor(random() * 100),
      }));
      const problem: CompositionProblem = { segmentMs, variants, memoryBudgetBytes: 50 + Math.floor(random() * 150) };
      const alpha = Math.floor(random() * 11) / 10;
      const score = (chosen: readonly CacheVariant[]): number => chosen.reduce((s, v) => s + alpha * v.hitRate + (1 - alpha) * latencyGain(segmentMs, v), 0);
      let best = 0;
      for (let mask = 0; mask < 1 << variants.length; mask++) {
        const chosen = variants.filter((_, i) => mask & (1 << i));
        if (violation(problem, chosen) === undefined) best = Math.max(best, score(chosen));
      }
      const solved = solveComposition(problem, alpha);
      expect(violation(problem, solved.variants)).toBeUndefined();
      expect(score(solved.variants)).toBeCloseTo(best, 9);
      if (best > 0) compared++;
      const swept = composeCaches(problem);
      expect(violation(problem, swept.variants)).toBeUndefined();
      // The lowest Eq. 10 among the α's choices and their subsets.
      const subsetsOf = (chosen: readonly CacheVariant[]) => Array.from({ length: 1 << chosen.length }, (_, mask) => chosen.filter((_, i) => mask & (1 << i)));
      const lowest = Math.min(...swept.sweep.flatMap((c) => subsetsOf(c.variants).map((s) => expectedLatency(segmentMs, s))));
      expect(swept.expectedMs).toBeCloseTo(lowest, 9);
      expect(swept.expectedMs).toBeLessThanOrEqual(Math.min(...swept.sweep.map((c) => c.expectedMs), expectedLatency(segmentMs, [])));
    }
    expect(compared).toBeGreaterThan(80);
  });
});
