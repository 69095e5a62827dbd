import { squishyBinPacking, type Session } from '../squishy.js';
import { runSimulation, type SimulationResult } from './engine.js';
import { paperProfiles, type PaperModel } from './paper-profiles.js';
import { peakLoad, scaled, zipf } from './workload.js';

/**
 * Reacting to a load step, Nexus §7.4 (Fig. 13): Poisson arrivals, 30 s epochs, at least 10 s
 * between plans, earlier on a large change; the load doubles and later falls back. The paper,
 * on 100 GPUs over 1,000 s: the change was detected within 12 s (and GPUs added), GPUs were
 * released about 10 s after demand fell, and 0.27% of requests were bad overall.
 *
 * The paper's timeline (the load rises at 326 s and falls at 644 s of a 1,000 s window) on a
 * smaller cluster, to run in seconds: 20 sessions with Zipf-0.9 rates needing 25 GPUs at peak
 * throughput, twice that between the rise and the fall: four classifiers (ResNet-50,
 * Inception4, GoogleNet-car, VGG-Face) at SLOs 50, 100, 200 and 400 ms, and SSD at 250, 300,
 * 350 and 400 ms (a detector needs a longer SLO to batch at all). Re-planning is `repack` on
 * the rates the simulator measures.
 * - detectS: from the rise to the first plan with more GPUs.
 * - releaseS: from the fall to the first plan with fewer GPUs.
 * - badRate: over the whole run.
 */
const CLASSIFIERS: readonly PaperModel[] = ['resnet50', 'inception4', 'googlenet-car', 'vgg-face'];
const TIERS = [
  { classifierSloMs: 50, ssdSloMs: 250 },
  { classifierSloMs: 100, ssdSloMs: 300 },
  { classifierSloMs: 200, ssdSloMs: 350 },
  { classifierSloMs: 400, ssdSloMs: 400 },
] as const;
const BASE_GPUS = 25;
const RISE_MS = 326_000;
const FALL_MS = 644_000;
const DURATION_MS = 1_000_000;

export interface ReactionFigures {
  detectS: number;
  releaseS: number;
  badRate: number;
  /** The bad rate before the rise: what Poisson bursts cost at a steady load. */
  steadyBadRate: number;
  plans: SimulationResult['plans'];
}

export function reaction(seed = 1): ReactionFigures {
  const mix = TIERS.flatMap((tier) => [
    ...CLASSIFIERS.map((model) => ({ model, sloMs: tier.classifierSloMs })),
    { model: 'ssd' as const, sloMs: tier.ssdSloMs },
  ]);
  const weights = zipf(mix.length, 0.9);
  const sessions: Session[] = mix.map(({ model, sloMs }, i) => ({ id: `${model}-${sloMs}ms`, model, sloMs, rate: weights[i] ?? 0 }));
  const base = scaled(sessions, BASE_GPUS / peakLoad(sessions, paperProfiles));
  const result = runSimulation({
    sessions: base.map(({ id, model, sloMs, rate }) => ({
      id,
      model,
      sloMs,
      arrivals: {
        kind: 'poisson',
        rate: [
          { fromMs: 0, rate },
          { fromMs: RISE_MS, rate: 2 * rate },
          { fromMs: FALL_MS, rate },
        ],
      },
    })),
    profileOf: paperProfiles,
    plan: squishyBinPacking(base, paperProfiles).nodes,
    drop: 'early',
    durationMs: DURATION_MS,
    seed,
    replan: {},
  });
  return {
    detectS: (firstChange(result.plans, RISE_MS, (after, before) => after > before) - RISE_MS) / 1000,
    releaseS: (firstChange(result.plans, FALL_MS, (after, before) => after < before) - FALL_MS) / 1000,
    badRate: result.badRate,
    steadyBadRate: badRate(result.perSecond.slice(0, RISE_MS / 1000)),
    plans: result.plans,
  };
}

function badRate(seconds: SimulationResult['perSecond']): number {
  return seconds.reduce((sum, s) => sum + s.bad, 0) / seconds.reduce((sum, s) => sum + s.requests, 0);
}

/** When the first plan after `atMs` changed the GPUs as `changed` says, compared with the plan in force at `atMs`; Infinity if none did. */
function firstChange(plans: SimulationResult['plans'], atMs: number, changed: (after: number, before: number) => boolean): number {
  const before = plans.filter((p) => p.atMs <= atMs).at(-1)?.gpus ?? 0;
  return plans.find((p) => p.atMs > atMs && changed(p.gpus, before))?.atMs ?? Infinity;
}
