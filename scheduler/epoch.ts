import { describeError, Topics, type Plan } from '../core/index.js';
import { idleTimeByBackend, planIdleTime } from './delay-tolerant.js';
import { mergeSharedPrefixes, type PrefixFamily } from './prefix-merge.js';
import type { ModelProfile, ProfileLookup } from './profile.js';
import { FRAMES, analyzeQuery, fanInNodes } from './query-analysis.js';
import { repack } from './repack.js';
import { planViolations } from './plan-check.js';
import { evenSloSplit } from '../analyzers/index.js';
import { sessionId, squishyBinPacking, type GpuNode, type PackOptions, type Session } from './squishy.js';
import { jointSplit, type AppQuery } from './joint-split.js';
import { downgradeToFit, type Variant } from './variants.js';

/** One app's load this epoch: its model tree, the frames entering it, the fan-out measured on each edge. */
export interface AppDemand {
  app: string;
  sloMs: number;
  nodes: readonly { id: string; model: string }[];
  edges: readonly { from: string; to: string }[];
  /** Frames per second entering the app from real-time sources: the load the plan packs. */
  framesRate: number;
  /** Frames per second from delay-tolerant sources (replays faster than real time): planned into idle time, not packed. */
  delayTolerantRate?: number;
  /** Measured γ by `from>to` (an edge from `frames` is 1, less into a specialized node); an edge not measured yet counts 1. */
  gammas: Readonly<Record<string, number>>;
}

export interface EpochInput {
  epoch: number;
  nowMs: number;
  apps: readonly AppDemand[];
  /** Backends that reported lately, one per accelerator: each takes one node of the plan. */
  backends: readonly string[];
  previous?: EpochState;
  families?: readonly PrefixFamily[];
}

/** What the next epoch starts from, to keep model moves few. */
export interface EpochState {
  nodes: readonly GpuNode[];
  /** Which backend runs each node, by node id. */
  backendOf: Readonly<Record<string, string>>;
  /** Each app's split of its SLO, ms by node: the next epoch stays with it while no GPU is saved. */
  splits?: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

export interface EpochOptions extends PackOptions {
  /** Discretization ε of the query analysis, ms. */
  epsilonMs: number;
  /** Cheaper variants of zoo models, served instead when the plan needs more backends than reported (MCDNN, variants.ts). */
  variants?: readonly Variant[];
}

export interface EpochPlan {
  plan: Plan;
  state: EpochState;
  /** What an operator should know: splits that fell back, nodes without a backend, prefixes left apart. */
  warnings: string[];
}

/** When to re-plan: each epoch, or earlier on a large change in load, never within `minEpochMs` of the last plan. */
export interface ReplanRule {
  epochMs: number;
  minEpochMs: number;
  /** The share of the planned-for load the load must move by to re-plan early. */
  loadChange: number;
}

/** 30 s epochs, 10 s apart at least, early when the load moved by more than 30% (Nexus §6; the 30% is ours). */
export const DEFAULT_REPLAN_RULE: ReplanRule = { epochMs: 30_000, minEpochMs: 10_000, loadChange: 0.3 };

/**
 * Whether to re-plan `sinceLastMs` after the last plan, with `load` measured now and `plannedLoad`
 * the one the plan was made for (any unit: frames/s in the service, GPUs in the simulator).
 * Nexus is silent on what a large change is: here the total load moving by more than a share,
 * one number for the whole workload, so noise in small sessions does not re-plan every second.
 */
export function replanDue(sinceLastMs: number, load: number, plannedLoad: number, rule: ReplanRule): boolean {
  if (sinceLastMs >= rule.epochMs) return true;
  return sinceLastMs >= rule.minEpochMs && Math.abs(load - plannedLoad) > rule.loadChange * plannedLoad;
}

export const edgeKey = (from: string, to: string): string => `${from}>${to}`;

/**
 * One epoch of the Nexus control plane (§6, Fig. 6), as a pure function: query analysis splits
 * each app's SLO at its measured rates, requests for the same model and SLO form one session,
 * sessions sharing a prefix and SLO merge, squishy bin packing (incremental after the first
 * epoch) places them on nodes, and each node goes to a backend. The plan's routing gives each
 * backend the share of a session's topics that matches the rate it serves.
 */
/** Backends a scheduler plans for at most: far more than a deployment has, few enough to bound a plan whatever load is reported. */
export const MAX_BACKENDS = 1024;

export function planEpoch(input: EpochInput, profileOf: ProfileLookup, given: EpochOptions): EpochPlan {
  // However much load is reported (a stats message is anyone's to write), no session takes more dedicated nodes than a deployment can have backends.
  const options = { ...given, maxNodes: MAX_BACKENDS };
  const warnings: string[] = [];
  const rates = new Map<string, Session>();
  const topics = new Map<string, Set<string>>();
  const nodesOf = new Map<string, { app: string; node: string }[]>();
  const running = input.apps.filter((app) => app.framesRate > 0);
  const splits = jointSplit(
    running.map((app) => ({ ...splitSlo(app, profileOf, options, warnings), ...(input.previous?.splits?.[app.app] ? { previous: input.previous.splits[app.app] } : {}) })),
    profileOf,
    options,
  );
  for (const [i, app] of running.entries()) {
    const split = splits[i]!;
    for (const node of app.nodes) {
      const rate = split.rates[node.id] ?? 0;
      const sloMs = split.sloMs[node.id] ?? app.sloMs;
      const id = sessionId(node.model, sloMs);
      const session = rates.get(id) ?? { id, model: node.model, sloMs: Math.round(sloMs), rate: 0 };
      session.rate += rate;
      rates.set(id, session);
      // A node fed by frames and by a parent's crops (fan-in) takes requests from both topics.
      const fed = app.edges.filter((e) => e.to === node.id).map((e) => (e.from === FRAMES ? Topics.frames : Topics.tasks(node.model)));
      topics.set(id, new Set([...(topics.get(id) ?? []), ...fed]));
      nodesOf.set(id, [...(nodesOf.get(id) ?? []), { app: app.app, node: node.id }]);
    }
  }

  const merge = mergeSharedPrefixes([...rates.values()], input.families ?? [], profileOf, options);
  warnings.push(...merge.notes);
  for (const [id, members] of Object.entries(merge.members)) {
    topics.set(id, new Set(members.flatMap((m) => [...(topics.get(m.id) ?? [])])));
    nodesOf.set(id, members.flatMap((m) => nodesOf.get(m.id) ?? []));
  }

  let packing = input.previous ? repack(input.previous.nodes, merge.sessions, profileOf, options) : squishyBinPacking(merge.sessions, profileOf, options);
  /** Sessions a variant serves, by the id the session was asked under. */
  const byVariant = new Map<string, Session & { variantOf: string; accuracy: number }>();
  if (options.variants?.length && packing.nodes.length > input.backends.length) {
    const fitted = downgradeToFit(merge.sessions, options.variants, input.backends.length, profileOf, options);
    if (fitted.downgrades.length > 0) {
      packing = fitted.packing;
      // A downgraded session is named by the model that serves it (an id always names one model:
      // backends keep sessions by id), and by the model asked for too where a session of that name exists.
      const ids = new Set(merge.sessions.map((x) => x.id));
      for (const served of fitted.sessions) {
        if (!served.variantOf) continue;
        const renamed = sessionId(served.model, served.sloMs);
        const id = ids.has(renamed) ? `${renamed}~${served.variantOf}` : renamed;
        byVariant.set(served.id, { ...served, id, variantOf: served.variantOf });
        for (const node of packing.nodes) for (const ns of node.sessions) if (ns.id === served.id) ns.id = id;
        topics.set(id, topics.get(served.id) ?? new Set());
      }
      for (const d of fitted.downgrades) warnings.push(`session ${d.session}: served by ${d.to} instead of ${d.from} (accuracy −${(100 * d.accuracyLost).toFixed(1)} points, frees ${d.devicesFreed.toFixed(2)} devices): the plan needs more backends than reported`);
    }
  }
  for (const u of packing.unschedulable) warnings.push(`session ${u.id} cannot be served: ${u.reason}`);
  // The packer's constraints hold by construction; a breach would be a bug, said rather than published silently.
  const served = merge.sessions.map((asked) => byVariant.get(asked.id) ?? asked);
  for (const violation of planViolations(packing, served, profileOf, options)) warnings.push(`plan check: ${violation}`);
  const backendOf = assignBackends(packing.nodes, input.backends, input.previous?.backendOf ?? {});
  const unplaced = packing.nodes.filter((n) => !backendOf[n.id]);
  if (unplaced.length > 0) {
    const waiting = unplaced.map((n) => n.sessions.map((s) => s.id).join('+'));
    warnings.push(`the plan needs ${packing.nodes.length} backends and ${input.backends.length} reported: ${waiting.slice(0, 10).join(', ')}${waiting.length > 10 ? ` and ${waiting.length - 10} more` : ''} wait for more`);
  }

  const placed = packing.nodes.filter((n) => backendOf[n.id]);
  const sessions = merge.sessions.map((asked) => {
    const variant = byVariant.get(asked.id);
    const s = variant ?? asked;
    const session = { id: s.id, model: s.model, sloMs: s.sloMs, nodes: nodesOf.get(asked.id) ?? [], ...profiled(s.model, profileOf) };
    return variant ? { ...session, variantOf: variant.variantOf, accuracy: variant.accuracy } : session;
  });
  const plan: Plan = {
    epoch: input.epoch,
    createdAtMs: input.nowMs,
    sessions,
    backends: placed.map((node) => ({
      backend: backendOf[node.id]!,
      dutyCycleMs: node.dutyCycleMs,
      sessions: node.sessions.map((s) => ({ session: s.id, batch: s.batch })),
    })),
    routing: sessions.flatMap((session) => {
      const weights: Record<string, number> = {};
      for (const node of placed) {
        const served = node.sessions.find((s) => s.id === session.id)?.rate ?? 0;
        if (served > 0) weights[backendOf[node.id]!] = (weights[backendOf[node.id]!] ?? 0) + served;
      }
      const total = Object.values(weights).reduce((a, b) => a + b, 0);
      if (total === 0) return [];
      const shares = Object.fromEntries(Object.entries(weights).map(([backend, w]) => [backend, w / total]));
      return [...(topics.get(session.id) ?? [])].map((topic) => ({ session: session.id, topic, weights: shares }));
    }),
  };
  const tolerant = delayTolerantDemands(input.apps);
  if (tolerant.length > 0) plan.delayTolerant = planIdleTime(idleTimeByBackend(placed, backendOf, input.backends, profileOf), tolerant, profileOf, options.deviceMemoryMB);
  if (warnings.length > 0) plan.warnings = [...warnings];
  return { plan, state: { nodes: packing.nodes, backendOf, splits: Object.fromEntries(running.map((app, i) => [app.app, splits[i]!.sloMs])) }, warnings };
}

/** A model's profile; undefined where none was measured (the lookup throws for those). */
function profileIfAny(model: string, profileOf: ProfileLookup): ModelProfile | undefined {
  try {
    return profileOf(model);
  } catch {
    return undefined;
  }
}

/**
 * ℓ(b) and the CPU time per request from a model's profile, as a plan carries them: backends
 * judge early drop by the same numbers the plan was packed with. Nothing without a profile.
 */
function profiled(model: string, profileOf: ProfileLookup): { latencyMs?: number[]; overheadMs?: number } {
  const profile = profileIfAny(model, profileOf);
  if (!profile) return {};
  const round = (ms: number): number => Math.round(ms * 100) / 100;
  // The plan contract carries ℓ(b) up to batch 1024, as large a batch as a zoo model may have.
  return { latencyMs: Array.from({ length: Math.min(profile.maxBatch, 1024) }, (_, i) => round(profile.latency(i + 1))), overheadMs: round(profile.overheadMs) };
}

/**
 * Query analysis at the app's measured load; the even split, not to be adjusted, when it finds no
 * feasible split. An app with fan-in is not adjusted across apps either: its DP enumerates start
 * times, and the search would run it dozens of times.
 */
function splitSlo(app: AppDemand, profileOf: ProfileLookup, options: EpochOptions, warnings: string[]): AppQuery {
  const query = { sloMs: app.sloMs, nodes: app.nodes, edges: app.edges.map((e) => ({ ...e, gamma: app.gammas[edgeKey(e.from, e.to)] ?? 1 })) };
  try {
    const split = analyzeQuery(query, app.framesRate, profileOf, options);
    return { query, framesRate: app.framesRate, split, adjustable: fanInNodes(query).length === 0 };
  } catch (err) {
    warnings.push(`app ${app.app}: query analysis failed (${describeError(err)}); splitting evenly`);
  }
  // Not priced: the analysis, which prices splits, failed.
  return { query, framesRate: app.framesRate, split: { sloMs: evenSloSplit(app), rates: nodeRates(app, app.framesRate), gpus: NaN }, adjustable: false };
}

/** Each node's requests/s at `framesRate`: the frames, or γ times each parent's rate, summed over its inputs. */
function nodeRates(app: AppDemand, framesRate: number): Record<string, number> {
  const rates = new Map<string, number>();
  const rateOf = (node: string): number => {
    let rate = rates.get(node);
    if (rate === undefined) {
      rate = app.edges.filter((e) => e.to === node).reduce((sum, e) => sum + (app.gammas[edgeKey(e.from, e.to)] ?? 1) * (e.from === FRAMES ? framesRate : rateOf(e.from)), 0);
      rates.set(node, rate);
    }
    return rate;
  };
  return Object.fromEntries(app.nodes.map((n) => [n.id, rateOf(n.id)]));
}

/** Delay-tolerant requests/s per model, over every app. */
function delayTolerantDemands(apps: readonly AppDemand[]): { model: string; rate: number }[] {
  const byModel = new Map<string, number>();
  for (const app of apps) {
    if (!app.delayTolerantRate) continue;
    const rates = nodeRates(app, app.delayTolerantRate);
    for (const node of app.nodes) byModel.set(node.model, (byModel.get(node.model) ?? 0) + (rates[node.id] ?? 0));
  }
  return [...byModel].map(([model, rate]) => ({ model, rate }));
}

/** Nodes keep the backend they had; the rest take free backends in order. */
function assignBackends(nodes: readonly GpuNode[], backends: readonly string[], previous: Readonly<Record<string, string>>): Record<string, string> {
  const available = new Set(backends);
  const backendOf: Record<string, string> = {};
  for (const node of nodes) {
    const had = previous[node.id];
    if (had && available.delete(had)) backendOf[node.id] = had;
  }
  const free = [...available];
  for (const node of nodes) {
    if (backendOf[node.id]) continue;
    const next = free.shift();
    if (next) backendOf[node.id] = next;
  }
  return backendOf;
}
