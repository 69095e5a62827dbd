import { describeError, ErrorCode, PanoptesError, Topics, type AppEdge, type AppLogic, type AppNode } from '../../core/index.js';

/** A node of an app's DAG, ready to run: its checked params and the edges leaving it. */
export interface PlannedNode {
  app: AppLogic;
  node: AppNode;
  params: unknown;
  children: { edge: AppEdge; node: AppNode }[];
}

/** Topics of the crops a set of apps sends to nodes below their roots: live sources' and delay-tolerant ones'. */
export function taskTopics(apps: readonly AppLogic[]): string[] {
  const models = apps.flatMap((app) => app.spec.edges.filter((e) => e.from !== 'frames').map((e) => app.spec.nodes.find((n) => n.id === e.to)!.model));
  return [...new Set(models)].flatMap((model) => [Topics.tasks(model), Topics.backfillTasks(model)]);
}

/**
 * Every node of the apps, its params checked by its model (an error names the app and node),
 * keyed `app/node`; and per app the nodes its frames enter.
 */
export async function planNodes(
  apps: readonly AppLogic[],
  parseParams: (model: string, params: AppNode['params']) => Promise<unknown>,
): Promise<{ nodes: Map<string, PlannedNode>; roots: Map<string, PlannedNode[]> }> {
  const nodes = new Map<string, PlannedNode>();
  const roots = new Map<string, PlannedNode[]>();
  for (const app of apps) {
    for (const node of app.spec.nodes) {
      const children = app.spec.edges.filter((e) => e.from === node.id).map((edge) => ({ edge, node: app.spec.nodes.find((n) => n.id === edge.to)! }));
      let params: unknown;
      try {
        // A node's learned cache runs inside its model's runner, which reads it among the params.
        params = await parseParams(node.model, node.cache ? { ...node.params, cache: node.cache } : node.params);
      } catch (err) {
        throw new PanoptesError(ErrorCode.AppInvalid, `app ${app.spec.name}, node ${node.id}: ${describeError(err)}`, { cause: err });
      }
      nodes.set(`${app.spec.name}/${node.id}`, { app, node, params, children });
    }
    roots.set(app.spec.name, app.spec.edges.filter((e) => e.from === 'frames').map((e) => nodes.get(`${app.spec.name}/${e.to}`)!));
  }
  return { nodes, roots };
}
