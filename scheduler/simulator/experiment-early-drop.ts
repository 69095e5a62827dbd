import { linearProfile, profileLookup } from '../profile.js';
import { peakThroughput } from '../worst-case.js';
import { runSimulation } from './engine.js';
import type { DropPolicy } from '../../analyzers/index.js';
import { maxGoodLoad } from './max-good-load.js';

/**
 * Early drop vs lazy drop, Nexus §4.3/§6.3 (Figs. 5 and 9): one GPU, SLO 100 ms, the model's
 * best throughput at that SLO fixed at 500 req/s while α varies, Poisson arrivals; the figure
 * is the highest rate at which 99% of requests are good, early over lazy, at the α where early
 * drop gains most (the paper: "up to 25%").
 *
 * *Silent in the paper:* how β follows α. Here the best batch b* meets 2ℓ(b*) = 100 ms with
 * b* / ℓ(b*) = 500 req/s, so b* = 25 and β = 50 − 25α ms (the digest's reading); 25 is also the
 * profile's largest batch and the plan's batch for both policies. 120 simulated seconds per rate.
 */
const EARLY_DROP_ALPHAS_MS = [0.05, 0.1, 0.25, 0.5, 1, 1.5, 2] as const;
const SLO_MS = 100;
const BEST_BATCH = 25;
const DURATION_MS = 120_000;

export interface EarlyDropFigures {
  /** Max over α of early's rate at 99% good over lazy's. */
  ratio: number;
  byAlpha: { alphaMs: number; betaMs: number; early: number; lazy: number; ratio: number }[];
}

export function earlyDropVsLazy(seed = 1): EarlyDropFigures {
  const byAlpha = EARLY_DROP_ALPHAS_MS.map((alphaMs) => {
    const betaMs = SLO_MS / 2 - BEST_BATCH * alphaMs;
    const early = maxGoodRate(alphaMs, betaMs, 'early', seed);
    const lazy = maxGoodRate(alphaMs, betaMs, 'lazy', seed);
    return { alphaMs, betaMs, early, lazy, ratio: early / lazy };
  });
  return { ratio: Math.max(...byAlpha.map((a) => a.ratio)), byAlpha };
}

/** Requests/s at which 99% are good on one GPU with ℓ(b) = αb + β. */
function maxGoodRate(alphaMs: number, betaMs: number, drop: DropPolicy, seed: number): number {
  const profileOf = profileLookup([linearProfile({ model: 'model', alphaMs, betaMs, maxBatch: BEST_BATCH })]);
  const peak = peakThroughput(profileOf('model'), SLO_MS, Infinity);
  if (!peak) throw new Error(`no batch meets ${SLO_MS} ms at α = ${alphaMs} ms`);
  const session = { id: 'session', model: 'model', sloMs: SLO_MS };
  const scale = maxGoodLoad(
    (s) => {
      const rate = s * peak.throughput;
      return runSimulation({
        sessions: [{ ...session, arrivals: { kind: 'poisson', rate } }],
        profileOf,
        plan: [{ id: 'gpu-0', dedicated: true, dutyCycleMs: profileOf('model').latency(peak.batch), sessions: [{ ...session, rate, batch: peak.batch }] }],
        drop,
        durationMs: DURATION_MS,
        seed,
      });
    },
    { highScale: 1.05, steps: 12 },
  );
  return scale * peak.throughput;
}
