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
  /**
   * Bounds on some nodes' budgets, ms, by node id: the DP gives such a node only a multiple of ε
   * within them (the joint split pins a shared model to the budget other apps give it).
   */
  bounds?: Readonly<Record<string, { minMs?: number; maxMs?: number }>>;
  /** Every node gets at least this budget, ms. @defaultValue one ε */
  minStageMs?: number;
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
 * The DP of §6.2: f(u, t) = min over k ≤ t of c_u(k) + Σ_children f(v, t − k), with t and k in
 * units of ε and c_u(k) = R_u / T_u(k·ε). Every node gets at least one ε. Among equally good
 * splits a node takes the larger share, so a leaf takes all that is left on its path.
 *
 * The paper shows trees and claims fork-join graphs. Here a node with several parents (fan-in)
 * runs on the inputs of each, so its rate is the sum, and its requests wait for its latest
 * parent: every path from `frames` must fit the SLO. Each such node's start time is enumerated;
 * once they are fixed every node has one parent left, and the DP runs over that forest in
 * absolute time, a parent of a fan-in node ending by the node's start.
 * `framesRate` is the request rate entering at `frames` (frames/s).
 */
export function analyzeQuery(query: QuerySpec, framesRate: number, profileOf: ProfileLookup, options: QueryAnalysisOptions): QuerySplit {
  if (!(query.sloMs > 0 && Number.isFinite(query.sloMs) && options.epsilonMs > 0 && Number.isFinite(options.epsilonMs))) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `query analysis needs a positive, finite SLO and ε; got ${query.sloMs} ms and ${options.epsilonMs} ms`, {
      details: { sloMs: query.sloMs, epsilonMs: options.epsilonMs },
    });
  }
  const graph = queryGraph(query, framesRate);
  const steps = Math.floor(query.sloMs / options.epsilonMs + 1e-9);
  const joins = query.nodes.map((n) => n.id).filter((id) => (graph.parents.get(id) ?? []).length > 1);
  // Each combination of fan-in starts is one pass of the DP over every node; the costs come first.
  const nodes = query.nodes.length;
  const work = Math.max(1, steps - 1) ** joins.length * nodes * (steps * steps + PASS_OVERHEAD) + nodes * steps * COST_WORK;
  if (work > MAX_SEARCH_WORK) {
    const fanIn = joins.length > 0 ? `, ${joins.length} of them with several parents (${joins.slice(0, 5).join(', ')}${joins.length > 5 ? ', …' : ''})` : '';
    throw new PanoptesError(
      ErrorCode.SchedulerInput,
      `query analysis would take about ${work.toPrecision(2)} steps of work: ${nodes} nodes${fanIn}, ${steps} steps of ${options.epsilonMs} ms; raise epsilonMs or simplify the graph`,
      { details: { nodes, joins, steps } },
    );
  }
  const cost = nodeCosts(query, graph.rates, profileOf, steps, options);
  let best: { gpus: number; shares: Map<string, number> } | undefined;
  for (const starts of startTimes(joins, steps)) {
    const split = forestSplit(graph, cost, steps, starts);
    if (split.gpus < (best?.gpus ?? Infinity)) best = split;
  }
  if (!best) {
    throw new PanoptesError(ErrorCode.SchedulerInput, `no split of ${query.sloMs} ms in steps of ${options.epsilonMs} ms meets every model's latency`, {
      details: { sloMs: query.sloMs, epsilonMs: options.epsilonMs },
    });
  }
  const sloMs = Object.fromEntries([...best.shares].map(([id, k]) => [id, k * options.epsilonMs]));
  return { sloMs, rates: Object.fromEntries(graph.rates), gpus: best.gpus };
}

/** Bounds the search over fan-in start times: about a second of work. */
const MAX_SEARCH_WORK = 2e8;
/** Work per node and pass besides the DP's steps² (arrays, maps), and per node and step to price it (one profile scan). */
const PASS_OVERHEAD = 200;
const COST_WORK = 64;

/** Every combination of start steps 1..steps−1 for the fan-in nodes; one empty combination without any. */
function* startTimes(joins: readonly string[], steps: number): Generator<Map<string, number>> {
  if (joins.length === 0) {
    yield new Map();
    return;
  }
  const [first, ...rest] = joins as [string, ...string[]];
  for (let start = 1; start < steps; start++) {
    for (const others of startTimes(rest, steps)) yield new Map(others).set(first, start);
  }
}

/**
 * The DP with the fan-in nodes' start steps fixed: g(u, s), the fewest GPUs for u and the nodes
 * that follow it when u starts at step s, where u must end by the SLO and by the start of any
 * fan-in node it feeds. Infinite GPUs when nothing fits.
 */
function forestSplit(
  graph: QueryGraph,
  cost: ReadonlyMap<string, Float64Array>,
  steps: number,
  starts: ReadonlyMap<string, number>,
): { gpus: number; shares: Map<string, number> } {
  const best = new Map<string, Float64Array>();
  const share = new Map<string, Int32Array>();
  for (const u of [...graph.order].reverse()) {
    const followers = (graph.children.get(u) ?? []).filter((v) => !starts.has(v));
    const end = Math.min(steps, ...(graph.children.get(u) ?? []).map((v) => starts.get(v) ?? steps));
    const c = cost.get(u) as Float64Array;
    const g = new Float64Array(steps + 1).fill(Infinity);
    const k = new Int32Array(steps + 1);
    for (let s = 0; s < end; s++) {
      for (let mine = 1; s + mine <= end; mine++) {
        let total = c[mine] ?? Infinity;
        for (const v of followers) total += (best.get(v) as Float64Array)[s + mine] ?? Infinity;
        if (total <= (g[s] ?? Infinity) && total < Infinity) {
          g[s] = total;
          k[s] = mine;
        }
      }
    }
    best.set(u, g);
    share.set(u, k);
  }
  const entries: [string, number][] = [...(graph.children.get(FRAMES) ?? []).filter((r) => !starts.has(r)).map((r): [string, number] => [r, 0]), ...starts];
  const gpus = entries.reduce((sum, [u, s]) => sum + ((best.get(u) as Float64Array)[s] ?? Infinity), 0);
  const shares = new Map<string, number>();
  const assign = (u: string, s: number): void => {
    const mine = (share.get(u) as Int32Array)[s] ?? 0;
    shares.set(u, mine);
    for (const v of graph.children.get(u) ?? []) if (!starts.has(v)) assign(v, s + mine);
  };
  if (Number.isFinite(gpus)) for (const [u, s] of entries) assign(u, s);
  return { gpus, shares };
}

/** GPUs a given split needs, Σ_v R_v / T_v(L_v): to compare splits, e.g. the even split, with the DP's. */
export function queryGpus(
  query: QuerySpec,
  framesRate: number,
  sloMsByNode: Readonly<Record<string, number>>,
  profileOf: ProfileLookup,
  options: { deviceMemoryMB?: number } = {},
): number {
  const { rates } = queryGraph(query, framesRate);
  return query.nodes.reduce((sum, node) => {
    const rate = rates.get(node.id) ?? 0;
    const peak = peakThroughput(profileOf(node.model), sloMsByNode[node.id] ?? 0, options.deviceMemoryMB ?? Infinity);
    return sum + (rate === 0 ? 0 : rate / (peak?.throughput ?? 0));
  }, 0);
}

/** c_u(k) for k = 0..steps: R_u / T_u(k·ε) GPUs; infinite when no batch meets k·ε or k·ε is out of the node's bounds, free without requests. */
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
      const bound = options.bounds?.[node.id];
      const lowest = Math.max(1, Math.ceil(Math.max(options.minStageMs ?? 0, bound?.minMs ?? 0) / options.epsilonMs - 1e-9));
      const highest = Math.min(steps, Math.floor((bound?.maxMs ?? Infinity) / options.epsilonMs + 1e-9));
      for (let k = lowest; k <= highest; k++) {
        const peak = peakThroughput(profile, k * options.epsilonMs, options.deviceMemoryMB ?? Infinity);
        if (rate === 0) c[k] = 0;
        else if (peak) c[k] = rate / peak.throughput;
      }
      return [node.id, c];
    }),
  );
}

interface QueryGraph {
  /**
   * Distinct parents and children of each node (`frames` included as a parent) that bound its
   * start: a parent that is an ancestor of another parent of the node ends before that one
   * starts, so its edge bounds nothing and is left out here (a specialized node's parent, whose
   * template feeds the node too). Rates count every edge.
   */
  parents: Map<string, string[]>;
  children: Map<string, string[]>;
  /** The nodes, every parent before its children. */
  order: string[];
  rates: Map<string, number>;
}

/**
 * The DAG under `frames` and each node's rate: Σ over its edges of γ times the parent's rate
 * (parallel edges from one parent add their γ). An edge to or from an unknown node, a cycle, or
 * a node not reached from `frames` is PANOPTES_SCHEDULER_INPUT.
 */
function queryGraph(query: QuerySpec, framesRate: number): QueryGraph {
  const ids = new Set(query.nodes.map((n) => n.id));
  const parents = new Map<string, string[]>();
  const children = new Map<string, string[]>();
  const link = (map: Map<string, string[]>, key: string, value: string): void => {
    const list = map.get(key) ?? [];
    if (!list.includes(value)) map.set(key, [...list, value]);
  };
  for (const edge of query.edges) {
    if (!ids.has(edge.to) || (edge.from !== FRAMES && !ids.has(edge.from))) {
      throw graphError(`edge ${edge.from} → ${edge.to} names an unknown node`, query);
    }
    link(parents, edge.to, edge.from);
    link(children, edge.from, edge.to);
  }
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (u: string): void => {
    if (state.get(u) === 'done') return;
    if (state.get(u) === 'visiting') throw graphError(`the graph has a cycle through ${u}`, query);
    state.set(u, 'visiting');
    for (const v of children.get(u) ?? []) visit(v);
    state.set(u, 'done');
    if (u !== FRAMES) order.push(u);
  };
  visit(FRAMES);
  order.reverse();
  const unreached = query.nodes.filter((n) => !state.has(n.id)).map((n) => n.id);
  if (unreached.length > 0) throw graphError(`not reached from ${FRAMES}: ${unreached.join(', ')}`, query);
  const rates = new Map<string, number>([[FRAMES, framesRate]]);
  for (const v of order) {
    rates.set(v, query.edges.filter((e) => e.to === v).reduce((sum, e) => sum + e.gamma * (rates.get(e.from) ?? 0), 0));
  }
  rates.delete(FRAMES);
  return { ...boundingEdges(parents, children, order), order, rates };
}

/** The parents and children that bound a node's start: a parent that is an ancestor of another parent of the node is left out. */
function boundingEdges(parents: ReadonlyMap<string, string[]>, children: ReadonlyMap<string, string[]>, order: readonly string[]): Pick<QueryGraph, 'parents' | 'children'> {
  const ancestors = new Map<string, Set<string>>([[FRAMES, new Set()]]);
  for (const v of order) ancestors.set(v, new Set((parents.get(v) ?? []).flatMap((p) => [p, ...(ancestors.get(p) ?? [])])));
  const bounds = (p: string, v: string): boolean => !(parents.get(v) ?? []).some((q) => q !== p && ancestors.get(q)!.has(p));
  return {
    parents: new Map([...parents].map(([v, list]) => [v, list.filter((p) => bounds(p, v))])),
    children: new Map([...children].map(([p, list]) => [p, list.filter((v) => bounds(p, v))])),
  };
}

/** The nodes whose start more than one parent bounds (fan-in): each multiplies query analysis' work by the SLO's steps. */
export function fanInNodes(query: QuerySpec): string[] {
  const { parents } = queryGraph(query, 0);
  return query.nodes.map((n) => n.id).filter((id) => (parents.get(id) ?? []).length > 1);
}

const graphError = (message: string, query: QuerySpec): PanoptesError =>
  new PanoptesError(ErrorCode.SchedulerInput, message, { details: { edges: query.edges } });
