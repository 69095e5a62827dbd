import type { BatchLatency } from './session-queue.js';

/**
 * ℓ(b) learned from the batches a backend runs, for early drop when no profile is given and for
 * plan-ahead beside the profile: a moving average per batch size seen, and between and beyond
 * them the line through the smallest and the largest (ℓ(b) = αb + β, Nexus Eq. 1). Sizes not run
 * for `staleMs` count only while no size is fresher: a figure from a slow spell must not keep a
 * size from being tried again (plan-ahead avoids a size it believes slow). Before any batch it is
 * 0: nothing is dropped for its cost until a cost is known, only for deadlines already past.
 */
export interface LatencyEstimate {
  observe(batch: number, ms: number): void;
  latency: BatchLatency;
}

export function createLatencyEstimate(options: { weight?: number; staleMs?: number; now?: () => number } = {}): LatencyEstimate {
  const { weight = 0.2, staleMs = 60_000, now = Date.now } = options;
  const seen = new Map<number, { mean: number; atMs: number }>();
  /** The sizes to estimate from: those run lately, else all. */
  const current = (): Map<number, number> => {
    const fresh = [...seen].filter(([, s]) => now() - s.atMs <= staleMs);
    return new Map((fresh.length > 0 ? fresh : [...seen]).map(([batch, s]) => [batch, s.mean]));
  };
  return {
    observe(batch, ms) {
      const previous = seen.get(batch)?.mean;
      seen.set(batch, { mean: previous === undefined ? ms : previous + weight * (ms - previous), atMs: now() });
    },
    latency(batch) {
      const mean = current();
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
