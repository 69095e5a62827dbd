import { linearProfile, profileLookup, type BatchProfile } from '../profile.js';
import type { Session } from '../squishy.js';
import { downgradeToFit, type Variant } from '../variants.js';
import { PAPER_PROFILES } from './paper-profiles.js';
import { arriving, peakLoad, scaled, simulatePlan, squishyOnCluster } from './workload.js';

/**
 * Model variants instead of drops (MCDNN, thesis ch. 4) as the load rises past what a fixed
 * cluster serves: 4 GPUs, ResNet-50 and Inception-v4 sessions at 100 ms (equal rates), Nexus's
 * runtime (early drop), uniform arrivals, 20 simulated seconds per load.
 * - `drop`: squishy packing on the cluster (the plan for the largest load that fits, as Nexus
 *   does when it runs out of backends); what does not fit is dropped.
 * - `variants`: `downgradeToFit` first, the same packing after.
 * Per load (a multiple of the load the cluster serves at full accuracy) the figures are the
 * requests served on time per second, and the accuracy over every request offered: a request
 * served on time counts its model's accuracy, a dropped or late one 0.
 *
 * *Our choice:* the variants. The thesis's catalog (Fig. 4.2) loses accuracy gently with cost
 * ("VGGNet loses about 4% accuracy with almost 10× less memory"); here each model has variants
 * at 1/2, 1/4 and 1/10 of its cost (ℓ(b) scaled) with accuracies 0.99, 0.97 and 0.96 of the model.
 */
const GPUS = 4;
const DURATION_MS = 20_000;
const LOADS = [0.8, 1, 1.25, 1.5, 2, 3];
const BASE = ['resnet50', 'inception4'] as const;
const LADDER = [
  { suffix: 'half', cost: 0.5, accuracy: 0.99 },
  { suffix: 'quarter', cost: 0.25, accuracy: 0.97 },
  { suffix: 'tenth', cost: 0.1, accuracy: 0.96 },
] as const;

const variants: Variant[] = BASE.flatMap((model) => LADDER.map((v) => ({ model: `${model}-${v.suffix}`, variantOf: model, accuracy: v.accuracy })));
const profileOf = profileLookup([
  ...PAPER_PROFILES,
  ...BASE.flatMap((model) => LADDER.map((v) => scaledProfile(PAPER_PROFILES.find((p) => p.model === model)!, `${model}-${v.suffix}`, v.cost))),
]);

export interface VariantFigures {
  loads: { load: number; dropGoodput: number; dropAccuracy: number; variantsGoodput: number; variantsAccuracy: number; downgrades: number }[];
}

export function variantsVsDropping(seed = 1): VariantFigures {
  const base = BASE.map((model) => ({ id: `${model}@100`, model, sloMs: 100, rate: 1 }));
  const full = scaled(base, GPUS / peakLoad(base, profileOf));
  const onCluster = squishyOnCluster((scale) => scaled(full, scale), GPUS, profileOf);
  return {
    loads: LOADS.map((load) => {
      const offered = scaled(full, load);
      const dropped = simulatePlan(arriving(offered, 'uniform'), onCluster(load), profileOf, { durationMs: DURATION_MS, seed });
      const fitted = downgradeToFit(offered, variants, GPUS, profileOf);
      // The plan that fits, or (when even the cheapest variants do not) the largest load that does, as for dropping.
      const nodes = fitted.packing.nodes.length <= GPUS ? fitted.packing.nodes : squishyOnCluster((scale) => scaled(fitted.sessions, scale), GPUS, profileOf)(1);
      const served = simulatePlan(arriving(fitted.sessions, 'uniform'), nodes, profileOf, { durationMs: DURATION_MS, seed });
      const accuracyOf = (s: Session): number => fitted.sessions.find((f) => f.id === s.id)?.accuracy ?? 1;
      const goodWeighted = fitted.sessions.reduce((sum, s) => sum + (served.bySession[s.id]?.good ?? 0) * accuracyOf(s), 0);
      return {
        load,
        dropGoodput: dropped.goodput,
        dropAccuracy: dropped.good / dropped.requests,
        variantsGoodput: served.goodput,
        variantsAccuracy: goodWeighted / served.requests,
        downgrades: fitted.downgrades.length,
      };
    }),
  };
}

/** A model's profile with every batch `cost` times as long: a cheaper variant of it. */
function scaledProfile(profile: BatchProfile, model: string, cost: number): BatchProfile {
  const one = profile.batches[0]!.latencyMs;
  const last = profile.batches.at(-1)!;
  const alphaMs = ((last.latencyMs - one) / (last.batch - 1)) * cost;
  return linearProfile({ model, device: profile.device, alphaMs, betaMs: one * cost - alphaMs, maxBatch: last.batch });
}
