import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDagRunner, type DagOutbox, type StageBudgets } from '../../analyzers/dag/index.js';
import { createAppLogic } from '../../apps/index.js';
import { appSpecSchema, parseConfig, projectRoot } from '../../core/index.js';

const jpeg = readFileSync(join(projectRoot(), 'test/fixtures/images/room-person.jpg'));
const app = createAppLogic(
  parseConfig(appSpecSchema, 'name: two\nsloMs: 900\nnodes: [{ id: find, model: centernet }, { id: read, model: ppocr-rec }]\nedges: [{ from: frames, to: find }, { from: find, to: read }]\n', 'two.yaml'),
);
const outbox: DagOutbox = { row: () => {}, task: () => {}, drop: () => {} };

/** The deadline the runner hands the root node's session for a frame captured at 1,000 ms, under `budgets`. */
async function rootDeadline(budgets: StageBudgets | undefined): Promise<number> {
  let deadline = NaN;
  const runner = createDagRunner({
    apps: [app],
    parseParams: async (_, params) => params,
    infer: async (_, __, ___, deadlineMs) => {
      deadline = deadlineMs;
      return { kind: 'detections', detections: [] };
    },
    budgets: () => budgets,
    realtime: () => true,
    crops: 'pixels',
    onFanOut: () => {},
  });
  await runner.start();
  await runner.runFrame({ source: 'cam', seq: 0, captureTimeMs: 1000, ptsMs: 0, width: 768, height: 432, jpeg }, ['two'], outbox, Promise.resolve());
  return deadline;
}

describe('the DAG runner', () => {
  it("gives a root node the capture time plus its stage budget: the plan's, else the even split", async () => {
    expect(await rootDeadline({ find: 700, read: 200 })).toBe(1700);
    expect(await rootDeadline(undefined)).toBe(1450);
    // A plan that leaves out a node of the app (made before the app was seen) gives way to the even split.
    expect(await rootDeadline({ find: 700 })).toBe(1450);
  });
});

describe('the DAG runner with fan-in', () => {
  // read runs on people's boxes and on text's boxes; its stage starts when the longer of the two paths ends.
  const fanIn = createAppLogic(
    parseConfig(
      appSpecSchema,
      `name: fan-in
sloMs: 1000
nodes: [{ id: people, model: centernet }, { id: text, model: ppocr-det }, { id: read, model: ppocr-rec }]
edges: [{ from: frames, to: people }, { from: frames, to: text }, { from: people, to: read, filter: { classes: [person] } }, { from: text, to: read }]
`,
      'fan-in.yaml',
    ),
  );

  it('sends a task down each parent\'s edge, due at capture + the longest path to the node + its budget', async () => {
    const box = { x1: 100, y1: 80, x2: 300, y2: 300 };
    const tasks: { node: string; parent: string | undefined; deadlineMs: number; budgetMs: number }[] = [];
    const runner = createDagRunner({
      apps: [fanIn],
      parseParams: async (_, params) => params,
      infer: async ({ node }) => ({ kind: 'detections', detections: [{ box, classId: 0, className: node === 'people' ? 'person' : 'text', score: 0.9 }] }),
      budgets: () => ({ people: 500, text: 300, read: 400 }),
      realtime: () => true,
      crops: 'pixels',
      onFanOut: () => {},
    });
    await runner.start();
    const out: DagOutbox = { ...outbox, task: (_, task) => tasks.push({ node: task.node, parent: task.lineage[0]?.split('/').at(-2), deadlineMs: task.deadlineMs, budgetMs: task.budgetMs }) };
    await runner.runFrame({ source: 'cam', seq: 0, captureTimeMs: 1000, ptsMs: 0, width: 768, height: 432, jpeg }, ['fan-in'], out, Promise.resolve());
    expect(tasks.sort((a, b) => (a.parent ?? '').localeCompare(b.parent ?? ''))).toEqual([
      { node: 'read', parent: 'people', deadlineMs: 1000 + 500 + 400, budgetMs: 400 },
      { node: 'read', parent: 'text', deadlineMs: 1000 + 500 + 400, budgetMs: 400 },
    ]);
  });
});

describe('the DAG runner with a specialized node', () => {
  // kind's template runs before its oracle: the scheduler plans them as a fork-join, and kind's
  // stage deadline includes the template's budget.
  const kinds = createAppLogic(
    parseConfig(
      appSpecSchema,
      `name: kinds
sloMs: 1200
nodes: [{ id: vehicles, model: centernet }, { id: kind, model: efficientnet-lite2, specialize: { templates: [efficientnet-lite0] } }]
edges: [{ from: frames, to: vehicles }, { from: vehicles, to: kind }]
`,
      'kinds.yaml',
    ),
  );

  it("gives the node the budgets of its parents, its template's and its own", async () => {
    const kindDeadline = async (budgets: StageBudgets | undefined) => {
      const tasks: { deadlineMs: number; budgetMs: number }[] = [];
      const runner = createDagRunner({
        apps: [kinds],
        parseParams: async (_, params) => params,
        infer: async () => ({ kind: 'detections', detections: [{ box: { x1: 100, y1: 80, x2: 300, y2: 300 }, classId: 2, className: 'car', score: 0.9 }] }),
        budgets: () => budgets,
        realtime: () => true,
        crops: 'pixels',
        onFanOut: () => {},
      });
      await runner.start();
      const out: DagOutbox = { ...outbox, task: (_, task) => tasks.push({ deadlineMs: task.deadlineMs, budgetMs: task.budgetMs }) };
      await runner.runFrame({ source: 'cam', seq: 0, captureTimeMs: 1000, ptsMs: 0, width: 768, height: 432, jpeg }, ['kinds'], out, Promise.resolve());
      return tasks;
    };
    expect(await kindDeadline({ vehicles: 500, 'kind~efficientnet-lite0': 200, kind: 300 })).toEqual([{ deadlineMs: 1000 + 500 + 200 + 300, budgetMs: 300 }]);
    // Before a plan, the even split of the scheduler's graph: three stages on kind's path.
    expect(await kindDeadline(undefined)).toEqual([{ deadlineMs: 1000 + 1200, budgetMs: 400 }]);
    // A plan without the template's budget gives way to the even split.
    expect(await kindDeadline({ vehicles: 500, kind: 300 })).toEqual([{ deadlineMs: 1000 + 1200, budgetMs: 400 }]);
  });
});
