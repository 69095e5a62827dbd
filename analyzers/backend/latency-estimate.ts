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
  /** Time per input at the batch size run last: what an input costs as the model runs now. Undefined before any batch. */
  perInput(): number | undefined;
}

export function createLatencyEstimate(options: { weight?: number; staleMs?: number; now?: () => number } = {}): LatencyEstimate {
  const { weight = 0.2, staleMs = 60_000, now = Date.now } = options;
  const seen = new Map<number, { mean: number; atMs: number }>();
  let lastAtMs = -Infinity;
  let lastBatch: number | undefined;
  return {
    observe(batch, ms) {
      const previous = seen.get(batch)?.mean;
      lastAtMs = now();
      lastBatch = batch;
      seen.set(batch, { mean: previous === undefined ? ms : previous + weight * (ms - previous), atMs: lastAtMs });
    },
    // On the batch-choosing path: no allocation, a pass over the few sizes seen.
    latency(batch) {
      // Sizes run lately count; when none has been, all do.
      const sinceMs = now() - lastAtMs <= staleMs ? now() - staleMs : -Infinity;
      let low: { batch: number; mean: number } | undefined;
      let high: typeof low;
      for (const [size, { mean, atMs }] of seen) {
        if (atMs < sinceMs) continue;
        if (size === batch) return mean;
        if (!low || size < low.batch) low = { batch: size, mean };
        if (!high || size > high.batch) high = { batch: size, mean };
      }
      if (!low || !high) return 0;
      if (low.batch === high.batch) return (low.mean * Math.max(batch, low.batch)) / low.batch;
      const alpha = Math.max(0, (high.mean - low.mean) / (high.batch - low.batch));
      return Math.max(0, low.mean + alpha * (batch - low.batch));
    },
    perInput: () => (lastBatch === undefined ? undefined : seen.get(lastBatch)!.mean / lastBatch),
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
