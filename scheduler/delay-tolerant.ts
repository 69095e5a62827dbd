import type { ProfileLookup } from './profile.js';
import type { GpuNode } from './squishy.js';

/**
 * DeepQuery's co-location at plan time (research/deepquery.md §2.8): delay-tolerant work
 * (replays faster than real time, backfills) is not packed as load. It runs in the time the
 * plan leaves idle on each backend, 1 − occupancy of its node (occupancy = Σ ℓ(b)/d over its
 * sessions), all of it on a backend the plan gives no node: its frames and crops are routed to
 * backends in proportion to that idle time, and backends size it there with plan-ahead
 * (analyzers/backend/plan-ahead.ts).
 *
 * For each model with delay-tolerant requests the plan states the rate offered and the rate the
 * idle time allows. The idle time is shared among the models in proportion to the device time
 * their rates ask for, each at its best throughput (max over b of b/ℓ(b) within the device's
 * memory; no SLO bounds the batch).
 */
export interface DelayTolerantDemand {
  model: string;
  /** Requests per second offered. */
  rate: number;
}

export interface IdleTimePlan {
  /** Idle time over the cluster, in devices. */
  idleDevices: number;
  models: { model: string; rate: number; capacity: number }[];
  /** Each backend's idle time, 0..1: the share of delay-tolerant frames and crops routed to it. */
  backends: Record<string, number>;
}

/**
 * Each reported backend's idle time: 1 − occupancy of the node it runs (`backendOf`: node id →
 * backend), 1 without a node. In tenths: the backfill topics' partitions are dealt by these, and
 * an epoch's small shifts in load must not make every backend rejoin its consumer group.
 */
export function idleTimeByBackend(nodes: readonly GpuNode[], backendOf: Readonly<Record<string, string>>, backends: readonly string[], profileOf: ProfileLookup): Record<string, number> {
  const idle: Record<string, number> = Object.fromEntries(backends.map((b) => [b, 1]));
  for (const node of nodes) {
    const backend = backendOf[node.id];
    if (backend !== undefined) idle[backend] = Math.round(10 * (1 - occupancy(node, profileOf))) / 10;
  }
  return idle;
}

export function planIdleTime(idle: Readonly<Record<string, number>>, demands: readonly DelayTolerantDemand[], profileOf: ProfileLookup, deviceMemoryMB = Infinity): IdleTimePlan {
  const idleDevices = Object.values(idle).reduce((sum, share) => sum + share, 0);
  const wanted = demands.filter((d) => d.rate > 0).map((d) => ({ ...d, best: bestThroughput(d.model, profileOf, deviceMemoryMB) }));
  // Devices each model's rate asks for; a model without a profile asks for none and gets no figure.
  const asked = wanted.reduce((sum, d) => sum + (d.best > 0 ? d.rate / d.best : 0), 0);
  return {
    idleDevices,
    // A model's share of the idle time is (rate/best)/asked devices, which serve that times best requests/s.
    models: wanted.map(({ model, rate, best }) => ({ model, rate, capacity: best > 0 ? (rate * idleDevices) / asked : 0 })),
    backends: { ...idle },
  };
}

/** The share of its duty cycle a node's batches take. */
export function occupancy(node: GpuNode, profileOf: ProfileLookup): number {
  if (node.dutyCycleMs <= 0) return 0;
  return Math.min(1, node.sessions.reduce((sum, s) => sum + profileOf(s.model).latency(s.batch), 0) / node.dutyCycleMs);
}

/** Requests/s at the model's best batch; 0 without a profile. */
function bestThroughput(model: string, profileOf: ProfileLookup, deviceMemoryMB: number): number {
  let profile;
  try {
    profile = profileOf(model);
  } catch {
    return 0;
  }
  let best = 0;
  for (let b = 1; b <= profile.maxBatch; b++) if (profile.memoryMB(b) <= deviceMemoryMB) best = Math.max(best, (1000 * b) / profile.latency(b));
  return best;
}
