import { ErrorCode, PanoptesError } from '../core/index.js';
import type { ModelProfile, ProfileLookup } from './profile.js';
import type { PackOptions, Session } from './squishy.js';
import { batchFor, EPSILON, gpuBudgetMs } from './worst-case.js';

/**
 * The optimum the greedy is measured against on small instances: the fewest GPUs for residual
 * loads (the ILP of Nexus §6.1, which CPLEX took hours to solve at 25 sessions), by brute force.
 * Every session runs whole on one GPU; a set of sessions shares a GPU when some duty cycle d
 * gives batches b = ⌈r·d⌉ with Σℓ(b) ≤ d, d + ℓ(b) ≤ SLO each and the memory within the device.
 * The search covers every set partition, as a dynamic program over subsets (3^n steps).
 * Taking b = ⌈r·d⌉ is the packer's own batch rule; with ℓ and memory non-decreasing in b no
 * larger batch can do better, so the result is then the true optimum.
 */

export const MAX_BRUTE_FORCE_SESSIONS = 12;

interface Load {
  profile: ModelProfile;
  budgetMs: number;
  rate: number;
}

export function fewestGpus(sessions: readonly Session[], profileOf: ProfileLookup, options: PackOptions = {}): number {
  const memoryMB = options.deviceMemoryMB ?? Infinity;
  const busy = sessions.filter((s) => s.rate > 0);
  const loads = busy.map((s) => {
    const profile = profileOf(s.model);
    return { profile, budgetMs: gpuBudgetMs(profile, s.sloMs), rate: s.rate };
  });
  if (loads.length > MAX_BRUTE_FORCE_SESSIONS) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `brute force takes at most ${MAX_BRUTE_FORCE_SESSIONS} sessions, got ${loads.length}`);
  }
  const subsets = 1 << loads.length;
  const feasible = new Uint8Array(subsets);
  for (let mask = 1; mask < subsets; mask++) {
    const members = loads.filter((_, i) => mask & (1 << i));
    feasible[mask] = sharesOneGpu(members, memoryMB) ? 1 : 0;
  }
  loads.forEach((_, i) => {
    if (!feasible[1 << i]) throw new PanoptesError(ErrorCode.SchedulerInput, `session ${busy[i]?.id} does not fit on one GPU`);
  });
  const fewest = new Float64Array(subsets).fill(Infinity);
  fewest[0] = 0;
  for (let mask = 1; mask < subsets; mask++) {
    const lowest = mask & -mask;
    // Every block of a partition of `mask` is tried once: as the block holding its lowest session.
    for (let block = mask; block > 0; block = (block - 1) & mask) {
      if (block & lowest && feasible[block]) fewest[mask] = Math.min(fewest[mask] ?? Infinity, 1 + (fewest[mask ^ block] ?? Infinity));
    }
  }
  return fewest[subsets - 1] ?? Infinity;
}

/**
 * Whether some duty cycle d serves all `loads` on one GPU. Between two consecutive points where
 * some ⌈r·d⌉ steps up, the batches are constant, so each interval [p, q] is checked once with the
 * batches of q: feasible when max(Σℓ, p) ≤ min(q, min(budget − ℓ)) and the memory fits.
 */
function sharesOneGpu(loads: readonly Load[], memoryMB: number): boolean {
  const capMs = Math.min(...loads.map((l) => l.budgetMs));
  const steps = new Set<number>([capMs]);
  for (const { profile, rate } of loads) {
    for (let batch = 1; batch <= profile.maxBatch && (1000 * batch) / rate < capMs; batch++) steps.add((1000 * batch) / rate);
  }
  let p = 0;
  for (const q of [...steps].sort((a, b) => a - b)) {
    let busyMs = 0;
    let usedMB = 0;
    let latest = Infinity;
    for (const { profile, budgetMs, rate } of loads) {
      const batch = batchFor(rate, q);
      const latency = profile.latency(batch);
      busyMs += latency;
      usedMB += profile.memoryMB(batch);
      latest = Math.min(latest, budgetMs - latency);
    }
    if (Math.max(busyMs, p) <= Math.min(q, latest) + EPSILON && usedMB <= memoryMB + EPSILON) return true;
    p = q;
  }
  return false;
}
