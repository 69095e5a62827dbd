import type { ProfileLookup } from '../profile.js';
import { squishyBinPacking, type GpuNode, type Session } from '../squishy.js';
import { peakThroughput } from '../worst-case.js';
import type { ArrivalKind } from './arrivals.js';
import { runSimulation, type SimSession, type SimulationResult } from './engine.js';

/** Sessions with rates → simulator sessions whose requests arrive at those rates. */
export function arriving(sessions: readonly Session[], kind: Exclude<ArrivalKind, 'trace'>): SimSession[] {
  return sessions.map(({ id, model, sloMs, rate }) => ({ id, model, sloMs, arrivals: { kind, rate } }));
}

/** Σ R/T at each session's SLO: the GPUs the sessions need at peak throughput. */
export function peakLoad(sessions: readonly Session[], profileOf: ProfileLookup): number {
  return sessions.reduce((sum, s) => sum + s.rate / (peakThroughput(profileOf(s.model), s.sloMs, Infinity)?.throughput ?? NaN), 0);
}

/** The sessions with every rate multiplied by `scale`. */
export function scaled<S extends { rate: number }>(sessions: readonly S[], scale: number): S[] {
  return sessions.map((s) => ({ ...s, rate: s.rate * scale }));
}

/** Zipf weights 1/k^s for k = 1..n, summing to 1. */
export function zipf(n: number, s: number): number[] {
  const raw = Array.from({ length: n }, (_, k) => 1 / Math.pow(k + 1, s));
  const total = raw.reduce((a, b) => a + b, 0);
  return raw.map((w) => w / total);
}

/** A fixed plan under a fixed load, with Nexus's runtime (early drop). */
export function simulatePlan(
  sessions: readonly SimSession[],
  plan: readonly GpuNode[],
  profileOf: ProfileLookup,
  options: { durationMs: number; seed: number },
): SimulationResult {
  return runSimulation({ sessions, plan, profileOf, drop: 'early', durationMs: options.durationMs, seed: options.seed });
}

/**
 * Squishy packing on a fixed cluster of `gpus`: the plan for the load while it fits; beyond,
 * the plan for the largest load found to fit (bisection over the scale, up to 1), over which
 * the whole load is routed, as the Nexus code does when it runs out of backends (the excess stays
 * unassigned and frontends keep routing by the planned weights). *Ours:* the plan's batches grow
 * with the load routed over it, each up to B, the largest its SLO allows. Left at the sizes
 * fitted for the smaller load, they cap what early drop can take from a longer queue, and a
 * cluster that could serve more drops it: squishy then fell below batch-oblivious on one model
 * at mixed SLOs (Fig. 16 (a), (b): 0.958 and 0.980), whose plan runs every session at B.
 */
export function squishyOnCluster(sessionsAt: (scale: number) => Session[], gpus: number, profileOf: ProfileLookup): (scale: number) => GpuNode[] {
  const plan = (scale: number): GpuNode[] => squishyBinPacking(sessionsAt(scale), profileOf).nodes;
  let [low, high] = [0, 1];
  for (let step = 0; step < 20; step++) {
    const middle = (low + high) / 2;
    if (plan(middle).length <= gpus) low = middle;
    else high = middle;
  }
  const largest = plan(low);
  return (scale) => {
    const nodes = plan(scale);
    if (nodes.length <= gpus) return nodes;
    return low === 0 ? largest : carrying(largest, scale / low, profileOf);
  };
}

/**
 * The nodes carrying `factor` times the load they were planned for, each session's batch grown in
 * proportion up to its B. The duty cycles stay: Σℓ(b) may now pass d and a session's d + ℓ(b) its
 * SLO, so the plan no longer promises its worst case; past a full cluster nothing can, and early
 * drop decides which requests are served.
 */
function carrying(nodes: readonly GpuNode[], factor: number, profileOf: ProfileLookup): GpuNode[] {
  return nodes.map((node) => ({
    ...node,
    sessions: node.sessions.map((s) => {
      const largestBatch = peakThroughput(profileOf(s.model), s.sloMs, Infinity)?.batch ?? s.batch;
      return { ...s, rate: s.rate * factor, batch: Math.max(s.batch, Math.min(largestBatch, Math.ceil(s.batch * factor))) };
    }),
  }));
}
