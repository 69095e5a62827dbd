import { describe, expect, it } from 'vitest';
import { batchObliviousAllocation, planViolations, profileLookup, squishyBinPacking, type Session } from '../../scheduler/index.js';
import { randomWorkload, seededRandom, TABLE_2, TABLE_2_SLO_MS } from './scheduler-fixtures.js';

const table2 = profileLookup(TABLE_2);
const session = (model: keyof typeof TABLE_2_SLO_MS, rate: number): Session => ({ id: model, model, sloMs: TABLE_2_SLO_MS[model], rate });

describe('batch-oblivious allocation (Nexus §7.2)', () => {
  it('shares GPUs by R/T and keeps batch B when sharing, which breaks the SLO squishy packing keeps', () => {
    // A 64/160 + B 32/128 + C 32/128 = 0.9 GPU: one GPU, shared at full batches of 16.
    const sessions = [session('A', 64), session('B', 32), session('C', 32)];
    const oblivious = batchObliviousAllocation(sessions, table2);
    expect(oblivious.nodes).toHaveLength(1);
    expect(oblivious.nodes[0]).toMatchObject({ dedicated: false, dutyCycleMs: 100 + 125 + 125 });
    expect(oblivious.nodes[0]?.sessions.map((s) => [s.id, s.batch, s.rate])).toEqual([
      ['A', 16, 64],
      ['B', 16, 32],
      ['C', 16, 32],
    ]);
    // A waits for B's and C's batches: 350 + 100 ms > 200 ms; and 16 per 350 ms is below 64 req/s.
    const violations = planViolations(oblivious, sessions, table2);
    expect(violations).toContain('node gpu-0: A worst case d + ℓ(b) = 450 ms > 200 ms');
    expect(violations).toContain('node gpu-0: A batch 16 < rate·d = 22.4');
    // Squishy packing needs 2 GPUs for the same load, and keeps every SLO.
    expect(squishyBinPacking(sessions, table2).nodes).toHaveLength(2);
  });

  it('on a fixed cluster each session gets GPUs in proportion to R/T; whole GPUs first, fractions fill the rest', () => {
    const sessions = [session('A', 320), session('B', 64), session('C', 64)];
    // Weights 2, 0.5, 0.5 of 3 → on 6 GPUs: 4, 1, 1.
    const { nodes } = batchObliviousAllocation(sessions, table2, { gpus: 6 });
    expect(nodes.map((n) => n.sessions.map((s) => [s.id, s.rate]))).toEqual([
      [['A', 80]],
      [['A', 80]],
      [['A', 80]],
      [['A', 80]],
      [['B', 64]],
      [['C', 64]],
    ]);
    expect(nodes.every((n) => n.dedicated)).toBe(true);
  });

  it('serves every session in full on ⌈ΣR/T⌉ GPUs, splitting a fraction over two GPUs when it must', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = seededRandom(seed);
      const { sessions, profileOf } = randomWorkload(random, {
        sessions: 1 + Math.floor(random() * 20),
        models: 1 + Math.floor(random() * 5),
        monotone: true,
        rateOfPeak: () => 3 * random(),
      });
      const packing = batchObliviousAllocation(sessions, profileOf);
      const served = new Map<string, number>();
      for (const s of packing.nodes.flatMap((n) => n.sessions)) served.set(s.id, (served.get(s.id) ?? 0) + s.rate);
      for (const s of sessions.filter((x) => !packing.unschedulable.some((u) => u.id === x.id))) {
        expect(served.get(s.id), `seed ${seed} ${s.id}`).toBeCloseTo(s.rate, 6);
      }
      const load = sessions.reduce((sum, s) => {
        const peak = packing.nodes.flatMap((n) => n.sessions).find((x) => x.id === s.id);
        return peak ? sum + s.rate / ((1000 * peak.batch) / profileOf(s.model).latency(peak.batch)) : sum;
      }, 0);
      expect(packing.nodes.length, `seed ${seed}`).toBe(Math.max(0, Math.ceil(load - 1e-9)));
    }
  });
});
