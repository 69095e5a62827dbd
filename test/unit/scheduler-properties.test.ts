import { describe, expect, it } from 'vitest';
import { fewestGpus, planViolations, profileLookup, squishyBinPacking } from '../../scheduler/index.js';
import { randomWorkload, seededRandom, TABLE_2, TABLE_2_SLO_MS } from './scheduler-fixtures.js';

describe('squishy bin packing: properties over random workloads', () => {
  it('every plan of 3,000 random session sets is valid', () => {
    // Rates from 1% of a GPU to 4 GPUs, with and without memory limits, pre/post-processing and
    // profiles that break the monotonicity assumptions.
    const problems: string[] = [];
    for (let seed = 1; seed <= 3000; seed++) {
      const random = seededRandom(seed);
      const { sessions, profileOf, deviceMemoryMB } = randomWorkload(random, {
        sessions: 1 + Math.floor(random() * 40),
        models: 1 + Math.floor(random() * 10),
        monotone: seed % 3 !== 0,
        withOverhead: true,
        rateOfPeak: () => Math.exp(Math.log(0.01) + random() * Math.log(400)),
      });
      const packing = squishyBinPacking(sessions, profileOf, { deviceMemoryMB });
      problems.push(...planViolations(packing, sessions, profileOf, { deviceMemoryMB }).map((p) => `seed ${seed}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it('the brute force agrees with Table 2 at low load: A and C cannot share at any duty cycle, so 2 GPUs', () => {
    const sessions = (['A', 'B', 'C'] as const).map((model) => ({ id: model, model, sloMs: TABLE_2_SLO_MS[model], rate: model === 'A' ? 64 : 32 }));
    expect(fewestGpus(sessions, profileLookup(TABLE_2))).toBe(2);
  });

  it('greedy GPUs against the brute-force optimum (every set partition) on 1,000 sets of up to 8 residual sessions', () => {
    let optimal = 0;
    let gapSum = 0;
    let worstGap = 0;
    let worstRatio = 1;
    let greedyTotal = 0;
    let optimumTotal = 0;
    const runs = 1000;
    for (let seed = 1; seed <= runs; seed++) {
      const random = seededRandom(seed);
      const { sessions, profileOf, deviceMemoryMB } = randomWorkload(random, {
        sessions: 2 + Math.floor(random() * 7),
        models: 1 + Math.floor(random() * 4),
        monotone: true,
        rateOfPeak: () => 0.02 + 0.93 * random(),
      });
      const packing = squishyBinPacking(sessions, profileOf, { deviceMemoryMB });
      const placed = sessions.filter((s) => !packing.unschedulable.some((u) => u.id === s.id));
      const greedy = packing.nodes.length;
      const best = fewestGpus(placed, profileOf, { deviceMemoryMB });
      expect(greedy, `seed ${seed}`).toBeGreaterThanOrEqual(best);
      if (greedy === best) optimal++;
      gapSum += best > 0 ? greedy / best - 1 : 0;
      worstGap = Math.max(worstGap, greedy - best);
      worstRatio = Math.max(worstRatio, best > 0 ? greedy / best : 1);
      greedyTotal += greedy;
      optimumTotal += best;
    }
    const figures = {
      runs,
      optimal: optimal / runs,
      meanGap: gapSum / runs,
      totalGap: greedyTotal / optimumTotal - 1,
      worstExtraGpus: worstGap,
      worstRatio,
    };
    console.log(`squishy vs brute force: ${JSON.stringify(figures)}`);
    expect(figures.optimal).toBeGreaterThan(0.8);
    expect(figures.meanGap).toBeLessThan(0.05);
    expect(worstGap).toBeLessThanOrEqual(1);
  });

  it('plans 1,000 sessions over about 100 GPUs in under a second', () => {
    const random = seededRandom(42);
    const { sessions, profileOf } = randomWorkload(random, {
      sessions: 1000,
      models: 50,
      monotone: true,
      sloRangeMs: [100, 400],
      betaRangeMs: [1, 5],
      rateOfPeak: () => 0.02 + 0.1 * random(),
    });
    squishyBinPacking(sessions.slice(0, 50), profileOf); // warm the JIT
    const started = performance.now();
    const packing = squishyBinPacking(sessions, profileOf);
    const elapsedMs = performance.now() - started;
    console.log(`planning: ${sessions.length} sessions → ${packing.nodes.length} GPUs in ${elapsedMs.toFixed(1)} ms`);
    expect(packing.nodes.length).toBeGreaterThan(80);
    expect(packing.nodes.length).toBeLessThan(150);
    expect(elapsedMs).toBeLessThan(1000);
  });
});
