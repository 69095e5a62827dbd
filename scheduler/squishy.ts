import { ErrorCode, PanoptesError } from '../core/index.js';
import type { ModelProfile, ProfileLookup } from './profile.js';
import { batchFor, EPSILON, gpuBudgetMs, peakThroughput } from './worst-case.js';

/**
 * Squishy bin packing, Nexus §6.1 Algorithm 1: sessions ⟨model, SLO, rate⟩ → GPU nodes, each a
 * duty cycle and a batch size per session. SCHEDULESATURATE gives busy sessions whole GPUs;
 * SCHEDULERESIDUE packs what is left by best-fit decreasing occupancy with MERGENODES.
 * Plain data in, plain data out.
 */

/** A session (§6.1): every request for one model under one latency SLO. `rate` is requests/s. */
export interface Session {
  id: string;
  model: string;
  sloMs: number;
  rate: number;
}

/** A session's id: requests for one model under one SLO, from any app, form one session. */
export const sessionId = (model: string, sloMs: number): string => `${model}@${Math.round(sloMs)}`;

/** A session on a node: `rate` is the share of the session's rate this node serves. */
export interface NodeSession extends Session {
  batch: number;
}

export interface GpuNode {
  /** Stable across epochs for a node that `repack` keeps; a new node gets an unused `gpu-N`. */
  id: string;
  /** A whole GPU for one session at batch B (SCHEDULESATURATE, or the occupancy guard); its duty cycle is ℓ(B). */
  dedicated: boolean;
  dutyCycleMs: number;
  sessions: NodeSession[];
}

export interface Packing {
  nodes: GpuNode[];
  /** Sessions no batch can serve within their SLO (or within the device's memory). */
  unschedulable: { id: string; reason: string }[];
}

export interface PackOptions {
  /**
   * Memory of one device, MB; the sessions on a node must fit in it together.
   * @defaultValue Infinity (no memory check)
   */
  deviceMemoryMB?: number;
  /**
   * Dedicated nodes one session may take: a load reported absurdly high (a stats message is
   * anyone's to write) would make millions of them. The rest of such a load is one residual.
   * @defaultValue Infinity
   */
  maxNodes?: number;
}

/** A node while packing: its duty cycle, the batch of each residual on it, and Σℓ(b), Σmemory and Σℓ(b)/d. */
export interface PackedNode {
  dutyCycleMs: number;
  members: { residual: Residual; batch: number }[];
  busyMs: number;
  usedMB: number;
  occupancy: number;
}

/** A session the packer can serve, with its dedicated-GPU batch B and throughput T. */
export interface Servable {
  session: Session;
  profile: ModelProfile;
  budgetMs: number;
  peak: { batch: number; throughput: number };
}

/** A session's residual load sized on its own (Algorithm 1 lines 12-15): b_i, d_i = b_i/r_i, occ_i = ℓ(b_i)/d_i. */
export interface Residual extends Servable {
  /** r_i, requests/s. */
  rate: number;
  batch: number;
  dutyCycleMs: number;
  occupancy: number;
}

export function squishyBinPacking(sessions: readonly Session[], profileOf: ProfileLookup, options: PackOptions = {}): Packing {
  const memoryMB = options.deviceMemoryMB ?? Infinity;
  const { servable, unschedulable } = admitSessions(sessions, profileOf, memoryMB);
  const { dedicated, residuals } = scheduleSaturate(servable, memoryMB, options.maxNodes);
  const multiplexed = scheduleResidue(residuals.filter(fitsInOneCycle), memoryMB);
  const guarded = residuals.filter((r) => !fitsInOneCycle(r)).map(dedicatedResidualNode);
  const nodes = [...dedicated, ...guarded, ...multiplexed.map(toGpuNode)];
  return { nodes: nodes.map((node, i) => ({ ...node, id: `gpu-${i}` })), unschedulable };
}

/** Validates sessions and finds B and T for each; sessions no batch can serve are set aside. */
export function admitSessions(
  sessions: readonly Session[],
  profileOf: ProfileLookup,
  memoryMB: number,
): { servable: Servable[]; unschedulable: Packing['unschedulable'] } {
  const seen = new Set<string>();
  const servable: Servable[] = [];
  const unschedulable: Packing['unschedulable'] = [];
  for (const session of sessions) {
    if (seen.has(session.id)) throw inputError(`session id "${session.id}" appears twice`, session);
    seen.add(session.id);
    if (!(Number.isFinite(session.rate) && session.rate >= 0)) throw inputError(`session "${session.id}" has rate ${session.rate}`, session);
    if (!(Number.isFinite(session.sloMs) && session.sloMs > 0)) throw inputError(`session "${session.id}" has SLO ${session.sloMs} ms`, session);
    if (session.rate === 0) continue;
    const profile = profileOf(session.model);
    const peak = peakThroughput(profile, session.sloMs, memoryMB);
    if (peak) servable.push({ session, profile, budgetMs: gpuBudgetMs(profile, session.sloMs), peak });
    else {
      unschedulable.push({
        id: session.id,
        reason: `no batch of ${session.model} meets 2ℓ(b) ≤ ${gpuBudgetMs(profile, session.sloMs)} ms (SLO less pre/post-processing) within ${memoryMB} MB`,
      });
    }
  }
  return { servable, unschedulable };
}

const inputError = (message: string, session: Session): PanoptesError =>
  new PanoptesError(ErrorCode.SchedulerInput, message, { details: { session } });

/**
 * SCHEDULESATURATE: n = ⌊R/T⌋ GPUs run the session alone at batch B; the rest r = R − n·T is a
 * residual load. A rate within float noise of n·T leaves no residual.
 */
export function scheduleSaturate(servable: readonly Servable[], memoryMB: number, maxNodes = Infinity): { dedicated: Omit<GpuNode, 'id'>[]; residuals: Residual[] } {
  const dedicated: Omit<GpuNode, 'id'>[] = [];
  const residuals: Residual[] = [];
  for (const s of servable) {
    const { batch, throughput } = s.peak;
    const n = Math.min(maxNodes, Math.floor(s.session.rate / throughput + EPSILON));
    for (let i = 0; i < n; i++) dedicated.push(dedicatedNode(s.session, s.profile.latency(batch), batch, throughput));
    const rest = s.session.rate - n * throughput;
    if (rest > EPSILON * s.session.rate) residuals.push(sizeResidual(s, rest, memoryMB));
  }
  return { dedicated, residuals };
}

/**
 * Lines 12-15: the largest batch b with ℓ(b) + b/r ≤ budget (Eq. 2), so the residual starts at
 * the GPU's best efficiency. When not even one request arrives within the budget (1/r too long),
 * b = 1 and the duty cycle is what the budget leaves, d = budget − ℓ(1): the GPU visits the
 * session more often than a batch fills, and b ≥ r·d still holds.
 */
export function sizeResidual(s: Servable, rate: number, memoryMB: number): Residual {
  const { profile, budgetMs } = s;
  const residual = (batch: number, dutyCycleMs: number, occupancy: number): Residual => ({ ...s, rate, batch, dutyCycleMs, occupancy });
  for (let batch = profile.maxBatch; batch >= 1; batch--) {
    const dutyCycleMs = (1000 * batch) / rate;
    const latency = profile.latency(batch);
    if (latency + dutyCycleMs <= budgetMs + EPSILON && profile.memoryMB(batch) <= memoryMB + EPSILON) {
      return residual(batch, dutyCycleMs, latency / dutyCycleMs);
    }
  }
  const dutyCycleMs = budgetMs - profile.latency(1);
  const fits = dutyCycleMs > 0 && profile.memoryMB(1) <= memoryMB + EPSILON;
  return residual(1, dutyCycleMs, fits ? profile.latency(1) / dutyCycleMs : Infinity);
}

/**
 * The guard for occupancy above 1: a residual close to T can need a smaller batch than B to
 * meet ℓ(b) + b/r ≤ SLO, and then more than a whole duty cycle. It gets its own GPU at batch B
 * instead, which serves r < T within 2ℓ(B) ≤ SLO.
 */
export const fitsInOneCycle = (r: Residual): boolean => r.occupancy <= 1 + EPSILON;

export function dedicatedResidualNode(r: Residual): Omit<GpuNode, 'id'> {
  return dedicatedNode(r.session, r.profile.latency(r.peak.batch), r.peak.batch, r.rate);
}

function dedicatedNode(session: Session, latencyMs: number, batch: number, rate: number): Omit<GpuNode, 'id'> {
  return { dedicated: true, dutyCycleMs: latencyMs, sessions: [nodeSession(session, rate, batch)] };
}

const nodeSession = (s: Session, rate: number, batch: number): NodeSession => ({ id: s.id, model: s.model, sloMs: s.sloMs, rate, batch });

export const singleNode = (r: Residual): PackedNode => ({
  dutyCycleMs: r.dutyCycleMs,
  members: [{ residual: r, batch: r.batch }],
  busyMs: r.profile.latency(r.batch),
  usedMB: r.profile.memoryMB(r.batch),
  occupancy: r.occupancy,
});

/**
 * MERGENODES (Fig. 7): the merged node runs at the shorter duty cycle d = min(d_x, d_y); the
 * sessions of the node whose duty cycle shrinks get batch ⌈r·d⌉ (integer, rounded up so
 * throughput ≥ rate), the others keep theirs. Feasible when Σℓ(b) ≤ d, each session's
 * d + ℓ(b) ≤ its budget and the memory fits. The paper shows that d + ℓ(b) ≤ SLO holds by
 * monotonicity; it is checked anyway because measured profiles need not be monotone.
 */
export function mergeNodes(x: PackedNode, y: PackedNode, memoryMB: number): PackedNode | undefined {
  const merged = mergedLoad(x, y, memoryMB);
  if (!merged) return undefined;
  const { dutyCycleMs, busyMs, usedMB } = merged;
  const [kept, resized] = x.dutyCycleMs <= y.dutyCycleMs ? [x, y] : [y, x];
  const members = [...kept.members, ...resized.members.map((m) => ({ residual: m.residual, batch: batchFor(m.residual.rate, dutyCycleMs) }))];
  return { dutyCycleMs, members, busyMs, usedMB, occupancy: busyMs / dutyCycleMs };
}

/**
 * MERGENODES' checks without building the node: the best-fit scan calls it for every node. The
 * node whose duty cycle stays keeps its batches, so only the other node's sessions are re-sized.
 */
function mergedLoad(x: PackedNode, y: PackedNode, memoryMB: number): { dutyCycleMs: number; busyMs: number; usedMB: number } | undefined {
  const [kept, resized] = x.dutyCycleMs <= y.dutyCycleMs ? [x, y] : [y, x];
  const dutyCycleMs = kept.dutyCycleMs;
  let busyMs = kept.busyMs;
  let usedMB = kept.usedMB;
  for (const { residual } of resized.members) {
    const batch = batchFor(residual.rate, dutyCycleMs);
    const latency = residual.profile.latency(batch);
    if (dutyCycleMs + latency > residual.budgetMs + EPSILON) return undefined;
    busyMs += latency;
    usedMB += residual.profile.memoryMB(batch);
    if (busyMs > dutyCycleMs + EPSILON || usedMB > memoryMB + EPSILON) return undefined;
  }
  return { dutyCycleMs, busyMs, usedMB };
}

/**
 * SCHEDULERESIDUE lines 16-30: residuals by occupancy, highest first; each merges into the node
 * where the merged occupancy is highest (best fit), or opens a node. `nodes` lets `repack` start
 * from the nodes it keeps.
 */
export function scheduleResidue(residuals: readonly Residual[], memoryMB: number, nodes: PackedNode[] = []): PackedNode[] {
  const ordered = [...residuals].sort((a, b) => b.occupancy - a.occupancy);
  for (const residual of ordered) {
    const single = singleNode(residual);
    const index = bestFit(nodes, single, memoryMB);
    const merged = index === undefined ? undefined : mergeNodes(nodes[index] as PackedNode, single, memoryMB);
    if (index !== undefined && merged) nodes[index] = merged;
    else nodes.push(single);
  }
  return nodes;
}

/** The index of the node that `incoming` merges into with the highest occupancy (best fit), if any. */
export function bestFit(nodes: readonly PackedNode[], incoming: PackedNode, memoryMB: number): number | undefined {
  let best: number | undefined;
  let bestOccupancy = 0;
  nodes.forEach((node, index) => {
    const merged = mergedLoad(node, incoming, memoryMB);
    const occupancy = merged ? merged.busyMs / merged.dutyCycleMs : 0;
    if (occupancy > bestOccupancy) [best, bestOccupancy] = [index, occupancy];
  });
  return best;
}

export function toGpuNode(node: PackedNode): Omit<GpuNode, 'id'> {
  return {
    dedicated: false,
    dutyCycleMs: node.dutyCycleMs,
    sessions: node.members.map((m) => nodeSession(m.residual.session, m.residual.rate, m.batch)),
  };
}
