import { ErrorCode, PanoptesError } from '../core/index.js';
import type { ProfileLookup } from './profile.js';
import { peakThroughput } from './worst-case.js';

/**
 * Complex-query analysis, Nexus §6.2: split an app's end-to-end latency SLO over its tree of
 * models so that the GPUs needed, Σ_v R_v / T_v(L_v), are fewest. R_v follows the measured
 * fan-out: R_child = γ·R_parent. T_v(L) is the dedicated-GPU throughput under SLO L by the same
 * worst-case rule the packer uses (2ℓ(B) ≤ L less pre/post-processing), not the paper's ℓ(b) ≤ L,
 * so that a split the analysis likes is one the packer can honour.
 */

/** Where an app's requests enter, as in app specs: an edge from `frames` feeds a root model. */
export const FRAMES = 'frames';

export interface QueryEdge {
  from: string;
  to: string;
  /** Measured fan-out γ: requests to `to` per request of `from` (per frame for `frames`). */
  gamma: number;
}

export interface QuerySpec {
  /** End-to-end latency SLO, ms. */
  sloMs: number;
  nodes: readonly { id: string; model: string }[];
  edges: readonly QueryEdge[];
}

export interface QueryAnalysisOptions {
  /** Discretization ε of the time budget, ms; the SLO is split in multiples of it. */
  epsilonMs: number;
  /** @defaultValue Infinity */
  deviceMemoryMB?: number;
}

export interface QuerySplit {
  /** Latency SLO per node, ms: a multiple of ε; on every root→leaf path they add up to at most the SLO. */
  sloMs: Record<string, number>;
  /** Request rate per node, requests/s. */
  rates: Record<string, number>;
  /** Σ_v R_v / T_v(L_v): GPUs the split needs at peak throughput. */
  gpus: number;
}

/**
 * The tree DP: f(u, t) = min over k ≤ t of c_u(k) + Σ_children f(v, t − k), with t and k in
 * units of ε and c_u(k) = R_u / T_u(k·ε). Every node gets at least one ε. Among equally good
 * splits a node takes the larger share, so a leaf takes all that is left on its path.
 * `framesRate` is the request rate entering at `frames` (frames/s).
 */
export function analyzeQuery(query: QuerySpec, framesRate: number, profileOf: ProfileLookup, options: QueryAnalysisOptions): QuerySplit {
  const { children, rates } = queryTree(query, framesRate);
  const steps = Math.floor(query.sloMs / options.epsilonMs + 1e-9);
  const cost = nodeCosts(query, rates, profileOf, steps, options);
  // best[u][t]: fewest GPUs for u's subtree within t steps; share[u][t]: the k that achieves it.
  const best = new Map<string, Float64Array>();
  const share = new Map<string, Int32Array>();
  const subtrees = (u: string): Float64Array => {
    const sum = new Float64Array(steps + 1);
    for (const v of children.get(u) ?? []) {
      const f = best.get(v) as Float64Array;
      for (let t = 0; t <= steps; t++) sum[t] = (sum[t] ?? 0) + (f[t] ?? Infinity);
    }
    return sum;
  };
  for (const u of postOrder(children)) {
    if (u === FRAMES) continue;
    const below = subtrees(u);
    const c = cost.get(u) as Float64Array;
    const f = new Float64Array(steps + 1).fill(Infinity);
    const k = new Int32Array(steps + 1);
    for (let t = 1; t <= steps; t++) {
      for (let mine = 1; mine <= t; mine++) {
        const total = (c[mine] ?? Infinity) + (below[t - mine] ?? Infinity);
        if (total <= (f[t] ?? Infinity) && total < Infinity) {
          f[t] = total;
          k[t] = mine;
        }
      }
    }
    best.set(u, f);
    share.set(u, k);
  }
  const gpus = subtrees(FRAMES)[steps] ?? Infinity;
  if (!Number.isFinite(gpus)) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `no split of ${query.sloMs} ms in steps of ${options.epsilonMs} ms meets every model's latency`, {
      details: { sloMs: query.sloMs, epsilonMs: options.epsilonMs },
    });
  }
  const sloMs: Record<string, number> = {};
  const assign = (u: string, t: number): void => {
    const mine = u === FRAMES ? 0 : ((share.get(u) as Int32Array)[t] ?? 0);
    if (u !== FRAMES) sloMs[u] = mine * options.epsilonMs;
    for (const v of children.get(u) ?? []) assign(v, t - mine);
  };
  assign(FRAMES, steps);
  return { sloMs, rates: Object.fromEntries(rates), gpus };
}

/** GPUs a given split needs, Σ_v R_v / T_v(L_v): to compare splits, e.g. the even split, with the DP's. */
export function queryGpus(
  query: QuerySpec,
  framesRate: number,
  sloMsByNode: Readonly<Record<string, number>>,
  profileOf: ProfileLookup,
  options: { deviceMemoryMB?: number } = {},
): number {
  const { rates } = queryTree(query, framesRate);
  return query.nodes.reduce((sum, node) => {
    const rate = rates.get(node.id) ?? 0;
    const peak = peakThroughput(profileOf(node.model), sloMsByNode[node.id] ?? 0, options.deviceMemoryMB ?? Infinity);
    return sum + (rate === 0 ? 0 : rate / (peak?.throughput ?? 0));
  }, 0);
}

/** c_u(k) for k = 0..steps: R_u / T_u(k·ε) GPUs; infinite when no batch meets k·ε, free without requests. */
function nodeCosts(
  query: QuerySpec,
  rates: ReadonlyMap<string, number>,
  profileOf: ProfileLookup,
  steps: number,
  options: QueryAnalysisOptions,
): Map<string, Float64Array> {
  return new Map(
    query.nodes.map((node) => {
      const profile = profileOf(node.model);
      const rate = rates.get(node.id) ?? 0;
      const c = new Float64Array(steps + 1).fill(Infinity);
      for (let k = 1; k <= steps; k++) {
        const peak = peakThroughput(profile, k * options.epsilonMs, options.deviceMemoryMB ?? Infinity);
        if (rate === 0) c[k] = 0;
        else if (peak) c[k] = rate / peak.throughput;
      }
      return [node.id, c];
    }),
  );
}

/**
 * The tree under `frames` and each node's rate. Parallel edges from one parent add their γ; a
 * node with two different parents (a DAG), an edge to or from an unknown node, or a node not
 * reached from `frames` is PANOPTES_SCHEDULER_INPUT.
 */
function queryTree(query: QuerySpec, framesRate: number): { children: Map<string, string[]>; rates: Map<string, number> } {
  const ids = new Set(query.nodes.map((n) => n.id));
  const parent = new Map<string, string>();
  const gamma = new Map<string, number>();
  for (const edge of query.edges) {
    if (!ids.has(edge.to) || (edge.from !== FRAMES && !ids.has(edge.from))) {
      throw treeError(`edge ${edge.from} → ${edge.to} names an unknown node`, query);
    }
    const other = parent.get(edge.to);
    if (other !== undefined && other !== edge.from) throw treeError(`${edge.to} has two parents (${other}, ${edge.from}); query analysis takes trees`, query);
    parent.set(edge.to, edge.from);
    gamma.set(edge.to, (gamma.get(edge.to) ?? 0) + edge.gamma);
  }
  const children = new Map<string, string[]>();
  for (const [child, from] of parent) children.set(from, [...(children.get(from) ?? []), child]);
  const rates = new Map<string, number>();
  const visit = (u: string, rate: number): void => {
    for (const v of children.get(u) ?? []) {
      const r = rate * (gamma.get(v) ?? 0);
      rates.set(v, r);
      visit(v, r);
    }
  };
  visit(FRAMES, framesRate);
  const unreached = query.nodes.filter((n) => !rates.has(n.id)).map((n) => n.id);
  if (unreached.length > 0) throw treeError(`not reached from ${FRAMES}: ${unreached.join(', ')}`, query);
  return { children, rates };
}

const treeError = (message: string, query: QuerySpec): PanoptesError =>
  new PanoptesError(ErrorCode.SchedulerInput, message, { details: { edges: query.edges } });

/** Children before parents, ending with `frames`. */
function postOrder(children: ReadonlyMap<string, readonly string[]>): string[] {
  const order: string[] = [];
  const visit = (u: string): void => {
    for (const v of children.get(u) ?? []) visit(v);
    order.push(u);
  };
  visit(FRAMES);
  return order;
}
