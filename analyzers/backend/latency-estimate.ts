import type { BatchLatency } from './session-queue.js';

/**
 * ℓ(b) learned from the batches a backend runs, for early drop when no profile is given: a
 * moving average per batch size seen, and between and beyond them the line through the
 * smallest and the largest (ℓ(b) = αb + β, Nexus Eq. 1). Before any batch it is 0: nothing
 * is dropped for its cost until a cost is known, only for deadlines already past.
 */
export interface LatencyEstimate {
  observe(batch: number, ms: number): void;
  latency: BatchLatency;
}

export function createLatencyEstimate(weight = 0.2): LatencyEstimate {
  const mean = new Map<number, number>();
  return {
    observe(batch, ms) {
      const previous = mean.get(batch);
      mean.set(batch, previous === undefined ? ms : previous + weight * (ms - previous));
    },
    latency(batch) {
      const known = mean.get(batch);
      if (known !== undefined) return known;
      const sizes = [...mean.keys()].sort((a, b) => a - b);
      const [low, high] = [sizes[0], sizes.at(-1)];
      if (low === undefined || high === undefined) return 0;
      if (low === high) return (mean.get(low)! * Math.max(batch, low)) / low;
      const alpha = Math.max(0, (mean.get(high)! - mean.get(low)!) / (high - low));
      return Math.max(0, mean.get(low)! + alpha * (batch - low));
    },
  };
}

/**
 * ℓ(b) as a plan gives it from the session's profile (`latencyMs[b - 1]`); beyond the last
 * measured batch, the line through the last two (one point: proportional to b).
 */
export function profiledLatency(latencyMs: readonly number[]): BatchLatency {
  const n = latencyMs.length;
  return (batch) => {
    if (batch <= n) return latencyMs[Math.max(1, batch) - 1]!;
    const last = latencyMs[n - 1]!;
    const slope = n > 1 ? last - latencyMs[n - 2]! : last;
    return last + Math.max(0, slope) * (batch - n);
  };
}
