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
