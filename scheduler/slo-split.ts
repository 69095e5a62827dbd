import { FRAMES } from './query-analysis.js';

/** What the even split reads of an app: its SLO and the shape of its graph (an `AppSpec` or a `QuerySpec`). */
export interface AppGraph {
  sloMs: number;
  nodes: readonly { id: string }[];
  edges: readonly { from: string; to: string }[];
}

/**
 * The even-split baseline of Nexus §2.4: every stage on an app's longest path from `frames`
 * gets the same share of the end-to-end SLO. Nodes on shorter branches get the same per-stage
 * share, so a branch never gets more than the deepest path allows. Query analysis (the
 * dynamic program) replaces this as the default; this stays as the baseline to compare with.
 */
export function evenSloSplit(app: AppGraph): Record<string, number> {
  const parent = new Map(app.edges.map((e) => [e.to, e.from]));
  const depth = (node: string): number => {
    let d = 0;
    for (let at: string | undefined = node; at && at !== FRAMES; at = parent.get(at)) d += 1;
    return d;
  };
  const stages = Math.max(...app.nodes.map((n) => depth(n.id)));
  return Object.fromEntries(app.nodes.map((n) => [n.id, app.sloMs / stages]));
}
