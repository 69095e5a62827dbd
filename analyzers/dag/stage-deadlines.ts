/**
 * One SLO flow from an app's config to each request's deadline, shared by the backend and the
 * scheduler's simulator. Query analysis splits an app's SLO into a budget per DAG node (the
 * stage budget); a request for a node must be done by the frame's capture time plus the budgets
 * of the stages up to and including that node, so a detector cannot spend its recognizer's
 * share. Its batch must finish earlier still by the CPU time around the batch.
 */

/** Where frames enter an app's DAG: the `from` of its root edges. */
const FRAMES = 'frames';

/** What the split and the deadlines read of an app: its SLO and the shape of its graph (an `AppSpec` or a `QuerySpec`). */
export interface AppGraph {
  sloMs: number;
  nodes: readonly { id: string }[];
  edges: readonly { from: string; to: string }[];
}

/** Stage budgets of one app, ms, by node id. */
export type StageBudgets = Readonly<Record<string, number>>;

/**
 * The even-split baseline of Nexus §2.4: every stage on an app's longest path from `frames`
 * gets the same share of the end-to-end SLO. Nodes on shorter branches get the same per-stage
 * share, so a branch never gets more than the deepest path allows. Query analysis replaces it
 * as the default; a backend uses it before the first plan, and the scheduler where the
 * analysis finds no split.
 */
export function evenSloSplit(app: AppGraph): Record<string, number> {
  const depth = longestPath(app, () => 1);
  const stages = Math.max(...app.nodes.map((n) => depth(n.id)));
  return Object.fromEntries(app.nodes.map((n) => [n.id, app.sloMs / stages]));
}

/**
 * The budgets of the stages from `frames` down to and including `node`, summed, ms. Where a
 * node has two parents (fan-in), its requests wait for the later one: the longest path counts.
 */
export function budgetUpTo(app: AppGraph, budgets: StageBudgets, node: string): number {
  return longestPath(app, (at) => {
    const budget = budgets[at];
    if (budget === undefined) throw new Error(`no stage budget for node ${at}`);
    return budget;
  })(node);
}

/** The largest sum of `weight` over the paths from `frames` down to and including a node; each node's worked out once. */
function longestPath(app: AppGraph, weight: (node: string) => number): (node: string) => number {
  const parents = parentsOf(app);
  const known = new Map<string, number>();
  const visiting = new Set<string>();
  const upTo = (at: string): number => {
    if (at === FRAMES) return 0;
    const done = known.get(at);
    if (done !== undefined) return done;
    if (visiting.has(at)) throw new Error(`app graph has a cycle through ${at}`);
    visiting.add(at);
    const sum = weight(at) + Math.max(0, ...(parents.get(at) ?? []).map(upTo));
    visiting.delete(at);
    known.set(at, sum);
    return sum;
  };
  return upTo;
}

/** When a stage must be done with a request: the frame's capture time plus its budget up to the stage. */
export function stageDeadlineMs(captureTimeMs: number, budgetUpToMs: number): number {
  return captureTimeMs + budgetUpToMs;
}

/** When a request's batch must finish on the device: its stage deadline less the CPU time per request around the batch (the profile's pre- and post-processing). */
export function batchDueMs(stageDeadline: number, overheadMs: number): number {
  return stageDeadline - overheadMs;
}

function parentsOf(app: AppGraph): Map<string, string[]> {
  const parents = new Map<string, string[]>();
  for (const e of app.edges) parents.set(e.to, [...(parents.get(e.to) ?? []), e.from]);
  return parents;
}
