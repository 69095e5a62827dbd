// Shared by the scheduler tests: the paper's worked-example profiles and seeded random workloads.
import { linearProfile, peakThroughput, profileLookup, type BatchProfile, type ProfileLookup, type Session } from '../../scheduler/index.js';

/** Nexus Table 2: batch latency (ms) at batch 4, 8 and 16; SLOs A 200 ms, B and C 250 ms. */
export const TABLE_2: BatchProfile[] = (
  [
    ['A', 50, 75, 100],
    ['B', 50, 90, 125],
    ['C', 60, 95, 125],
  ] as const
).map(([model, l4, l8, l16]) => ({
  version: 1,
  model,
  device: 'gtx1080',
  batches: [
    { batch: 4, latencyMs: l4, stdMs: 0, memoryMB: 1000 },
    { batch: 8, latencyMs: l8, stdMs: 0, memoryMB: 1200 },
    { batch: 16, latencyMs: l16, stdMs: 0, memoryMB: 1600 },
  ],
}));
export const TABLE_2_SLO_MS = { A: 200, B: 250, C: 250 } as const;

/** The simulator's seeded PRNG, so every random case can be replayed from its seed. */
export { seededRandom } from '../../scheduler/index.js';

export interface Workload {
  sessions: Session[];
  profiles: BatchProfile[];
  profileOf: ProfileLookup;
  deviceMemoryMB: number;
}

/**
 * Random profiles and sessions. `monotone` profiles are linear (ℓ(b) non-decreasing, ℓ(b)/b
 * non-increasing); otherwise the std varies per batch, which can break both, as measured
 * profiles do. `rateOfPeak` draws a session's rate as a multiple of its peak throughput T.
 */
export function randomWorkload(
  random: () => number,
  options: {
    sessions: number;
    models: number;
    monotone: boolean;
    rateOfPeak: () => number;
    withOverhead?: boolean;
    sloRangeMs?: readonly [number, number];
    betaRangeMs?: readonly [number, number];
  },
): Workload {
  const between = (lo: number, hi: number): number => lo + (hi - lo) * random();
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const profiles = Array.from({ length: options.models }, (_, i) => {
    const profile = linearProfile({
      model: `m${i}`,
      alphaMs: between(0.2, 5),
      betaMs: between(...(options.betaRangeMs ?? [1, 40])),
      maxBatch: pick([4, 8, 16, 32, 64]),
      stdMs: options.monotone ? pick([0, 0.5, 2]) : 0,
      memory: { baseMB: between(100, 2000), perItemMB: between(0, 40) },
    });
    if (!options.monotone) profile.batches = profile.batches.map((m) => ({ ...m, stdMs: between(0, 0.3) * m.latencyMs }));
    if (options.withOverhead && random() < 0.5) {
      profile.preprocessMs = between(0, 10);
      profile.postprocessMs = between(0, 5);
    }
    return profile;
  });
  const profileOf = profileLookup(profiles);
  const deviceMemoryMB = pick([Infinity, 4000, 8000]);
  const sessions = Array.from({ length: options.sessions }, (_, i) => {
    const model = pick(profiles).model;
    const sloMs = Math.round(between(...(options.sloRangeMs ?? [20, 400])));
    const peak = peakThroughput(profileOf(model), sloMs, deviceMemoryMB);
    return { id: `s${i}`, model, sloMs, rate: peak ? peak.throughput * options.rateOfPeak() : between(1, 100) };
  });
  return { sessions, profiles, profileOf, deviceMemoryMB };
}
