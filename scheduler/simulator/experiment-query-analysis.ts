import { analyzeQuery, FRAMES, type QuerySpec } from '../query-analysis.js';
import { evenSloSplit } from '../../analyzers/index.js';
import type { Session } from '../squishy.js';
import type { SimSession } from './engine.js';
import { maxGoodLoad } from './max-good-load.js';
import { paperProfiles } from './paper-profiles.js';
import { simulatePlan, squishyOnCluster } from './workload.js';

/**
 * Query analysis vs the even split, Nexus §7.5 (Fig. 17): SSD, then Inception γ times per
 * frame, on 8 GPUs; the figure is the highest frame rate at which 99% of requests are good with
 * the dynamic program's split over the one with the even split (squishy packing and early drop
 * under both), per γ at an end-to-end SLO of 400 ms (the traffic app's; the paper sweeps
 * 300-500 ms, which `byGamma` also reports).
 *
 * As in the squishy experiment, a load beyond what the plan fits on 8 GPUs is routed over the
 * plan for the largest load that fits (`squishyOnCluster`). *Silent in the paper:* the fan-out's distribution: each
 * SSD request makes ⌊γ⌋ Inception requests and one more with probability γ − ⌊γ⌋, when its batch
 * finishes. Uniform frame arrivals; ε = 10 ms; 20 simulated seconds per rate.
 */
const GAMMAS = [0.1, 1, 10] as const;
const QUERY_SLOS_MS = [300, 400, 500] as const;
const HEADLINE_SLO_MS = 400;
const GPUS = 8;
const EPSILON_MS = 10;
const DURATION_MS = 20_000;

export interface QueryAnalysisFigures {
  /** Per γ (0.1, 1, 10), at 400 ms: frame rate at 99% good with the DP's split over the even split's. */
  ratios: number[];
  byGamma: { gamma: number; sloMs: number; split: Record<string, number>; analysis: number; even: number; ratio: number }[];
}

export function queryAnalysisVsEven(seed = 1): QueryAnalysisFigures {
  const byGamma = GAMMAS.flatMap((gamma) =>
    QUERY_SLOS_MS.map((sloMs) => {
      const query = ssdToInception(gamma, sloMs);
      const split = analyzeQuery(query, 1, paperProfiles, { epsilonMs: EPSILON_MS });
      // Frames/s at which the DP's split needs all 8 GPUs at peak throughput: no split can do better.
      const frames = GPUS / split.gpus;
      const analysis = frames * maxGoodScale(gamma, split.sloMs, frames, seed);
      const even = frames * maxGoodScale(gamma, evenSloSplit(query), frames, seed);
      return { gamma, sloMs, split: split.sloMs, analysis, even, ratio: analysis / even };
    }),
  );
  return { ratios: byGamma.filter((g) => g.sloMs === HEADLINE_SLO_MS).map((g) => g.ratio), byGamma };
}

function ssdToInception(gamma: number, sloMs: number): QuerySpec {
  return {
    sloMs,
    nodes: [
      { id: 'ssd', model: 'ssd' },
      { id: 'inception', model: 'inception4' },
    ],
    edges: [
      { from: FRAMES, to: 'ssd', gamma: 1 },
      { from: 'ssd', to: 'inception', gamma },
    ],
  };
}

/** The highest scale of `frames` frames/s at which 99% of requests are good with this split of the SLO. */
function maxGoodScale(gamma: number, sloMs: Record<string, number>, frames: number, seed: number): number {
  const sessionsAt = (scale: number): Session[] => [
    { id: 'ssd', model: 'ssd', sloMs: sloMs.ssd ?? 0, rate: frames * scale },
    { id: 'inception', model: 'inception4', sloMs: sloMs.inception ?? 0, rate: frames * scale * gamma },
  ];
  const plan = squishyOnCluster(sessionsAt, GPUS, paperProfiles);
  return maxGoodLoad(
    (scale) => {
      const [ssd, inception] = sessionsAt(scale) as [Session, Session];
      const sessions: SimSession[] = [
        { ...ssd, arrivals: { kind: 'uniform', rate: ssd.rate }, children: [{ session: 'inception', gamma }] },
        inception,
      ];
      return simulatePlan(sessions, plan(scale), paperProfiles, { durationMs: DURATION_MS, seed });
    },
    { highScale: 1 },
  );
}
