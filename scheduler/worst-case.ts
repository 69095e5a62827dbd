import type { ModelProfile } from './profile.js';

/**
 * The worst-case latency rules of Nexus §4.1/§6.1, shared by the packer, the query analysis and
 * the plan checker so that all three agree on what "meets the SLO" means.
 *
 * - A request waits at most one duty cycle d for its session's turn, then runs in a batch of
 *   ℓ(b): worst case d + ℓ(b). A GPU dedicated to one session runs back to back, d = ℓ(B), so
 *   its worst case is 2ℓ(B).
 * - The GPU's share of a session's SLO is the SLO less the request's CPU pre/post-processing
 *   (as the Nexus code does), so every rule compares against `gpuBudgetMs`.
 */

/** Slack for float comparisons: a 200 ms budget met at 200.0000000001 ms is met. */
export const EPSILON = 1e-9;

/** What a session's batches may spend waiting and running on the GPU, ms. */
export function gpuBudgetMs(profile: ModelProfile, sloMs: number): number {
  return sloMs - profile.overheadMs;
}

/** The batch that serves `rate` requests/s when the GPU visits the session every `dutyCycleMs`: ⌈r·d⌉, at least 1. */
export function batchFor(rate: number, dutyCycleMs: number): number {
  return Math.max(1, Math.ceil((rate * dutyCycleMs) / 1000 - EPSILON));
}

/**
 * SCHEDULESATURATE's rule for a dedicated GPU: B = argmax_b {2ℓ(b) ≤ budget} with its memory
 * within the device, and the throughput T = B/ℓ(B) in requests/s. Undefined when not even
 * batch 1 fits: the session cannot be served on this device.
 */
export function peakThroughput(
  profile: ModelProfile,
  sloMs: number,
  deviceMemoryMB: number,
): { batch: number; throughput: number } | undefined {
  const budget = gpuBudgetMs(profile, sloMs);
  for (let batch = profile.maxBatch; batch >= 1; batch--) {
    const latency = profile.latency(batch);
    if (2 * latency <= budget + EPSILON && profile.memoryMB(batch) <= deviceMemoryMB + EPSILON) {
      return { batch, throughput: (1000 * batch) / latency };
    }
  }
  return undefined;
}
