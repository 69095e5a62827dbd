import { linearProfile, profileLookup, type BatchProfile, type ProfileLookup } from '../profile.js';

/**
 * The batch profiles the experiments use, from what the Nexus paper (and its sources) quote;
 * no GPU measured them here. The paper gives batch-1 latencies and a batching gain of
 * "4.7-13.3× for batch sizes of 32" (§2); a linear profile ℓ(b) = α·b + β (Eq. 1) through the
 * batch-1 latency with a gain of 8× at batch 32 (the middle of that range) has
 * α = 3·ℓ(1)/31 and β = 28·ℓ(1)/31. Batches go up to 64.
 */
const GAIN_AT_32 = 8;
const MAX_BATCH = 64;

function fromBatchOne(model: string, latencyMs: number): BatchProfile {
  const alphaMs = (latencyMs * (32 / GAIN_AT_32 - 1)) / 31;
  return linearProfile({ model, device: DEVICE, alphaMs, betaMs: latencyMs - alphaMs, maxBatch: MAX_BATCH });
}

const DEVICE = 'paper';

/** Table 1 (V100) and §7.3: batch-1 latencies, ms. */
const BATCH_ONE_MS = {
  lenet5: 0.1, // Table 1: "< 0.1"
  vgg7: 1, // Table 1: "< 1"
  resnet50: 6.2,
  inception4: 7,
  'googlenet-car': 4.2, // §7.3
} as const;

export type PaperModel = keyof typeof BATCH_ONE_MS | 'ssd' | 'vgg-face' | 'fig3-x' | 'fig3-y';

export const PAPER_PROFILES: readonly BatchProfile[] = [
  ...Object.entries(BATCH_ONE_MS).map(([model, ms]) => fromBatchOne(model, ms)),
  // SSD: 47 ms at batch 1 (§7.3) and the thesis's 16.4 ms per extra image (Table 3.6: 4 backends
  // serve 142/191/204 req/s at batch 3/7/11); batching gains little on a detector.
  linearProfile({ model: 'ssd', device: DEVICE, alphaMs: 16.4, betaMs: 47 - 16.4, maxBatch: 32 }),
  // VGG-Face: not in the paper; the line through the Nexus code's TITAN X profile at batch 1
  // (6.35 ms) and 64 (227.6 ms).
  linearProfile({ model: 'vgg-face', device: DEVICE, alphaMs: (227.6 - 6.35) / 63, betaMs: 6.35 - (227.6 - 6.35) / 63, maxBatch: MAX_BATCH }),
  // Fig. 3's models X and Y: throughput 200/250/300 and 300/400/500 req/s at 40/50/60 ms, read
  // under the 2ℓ(B) ≤ SLO rule (as docs/scheduler.md explains).
  measured('fig3-x', [[4, 20], [6, 24], [9, 30]]),
  measured('fig3-y', [[6, 20], [10, 25], [15, 30]]),
];

function measured(model: string, points: readonly (readonly [number, number])[]): BatchProfile {
  return { version: 1, model, device: DEVICE, batches: points.map(([batch, latencyMs]) => ({ batch, latencyMs, stdMs: 0, memoryMB: 0 })) };
}

export const paperProfiles: ProfileLookup = profileLookup(PAPER_PROFILES);
