import { describe, expect, it } from 'vitest';
import { createIntake } from '../../analyzers/backend/intake.js';
import { emptyTally } from '../../analyzers/backend/outbox.js';
import type { DagRunner } from '../../analyzers/dag/index.js';
import { appSpecSchema, createMemoryBus, silentLogger, taskGroup, Topics, type AppLogic, type Plan } from '../../core/index.js';

/** frames → detect (det) → read (rec): the backends consume the frames and rec's tasks. */
const app = { spec: appSpecSchema.parse({ name: 'plates', sloMs: 1000, nodes: [{ id: 'detect', model: 'det' }, { id: 'read', model: 'rec' }], edges: [{ from: 'frames', to: 'detect' }, { from: 'detect', to: 'read' }] }) } as AppLogic;
const runner = { apps: [app], models: () => ['det', 'rec'], runFrame: async () => undefined, runTask: async () => undefined } as unknown as DagRunner;

/** Frames on `frames`, rec's tasks on `tasks`. */
const planOf = (epoch: number, frames: string, tasks: string): Plan => ({
  epoch,
  createdAtMs: 0,
  sessions: [],
  backends: [],
  routing: [
    { session: 'det@1000', topic: Topics.frames, weights: { [frames]: 1 } },
    { session: 'rec@1000', topic: Topics.tasks('rec'), weights: { [tasks]: 1 } },
  ],
});

describe("a backend's intake", () => {
  it("consumes the frames and each model's tasks in groups of their own: a plan that moves only the tasks leaves the frames' group as it is", async () => {
    const bus = createMemoryBus();
    await bus.createTopics([Topics.frames, Topics.backfillFrames, Topics.tasks('rec'), Topics.backfillTasks('rec')].map((name) => ({ name, partitions: 2 })));
    const intake = createIntake({ id: 'a', bus, groupId: 'g', runner, appsForSource: () => ['plates'], batchOf: () => 1, producer: bus.producer(), tally: emptyTally(), onFrame: () => undefined, logger: silentLogger() });
    const members = () => Object.fromEntries(bus.status().groups.map((g) => [g.groupId, g.members]));
    await intake.join(planOf(1, 'a', 'a'));
    const before = members();
    expect(Object.keys(before).sort()).toEqual(['g', taskGroup('g', 'rec')]);
    expect(intake.partitions()).toBe(8);
    // The same routing to two decimals: nobody leaves.
    await intake.leaveFor(planOf(2, 'a', 'a'));
    expect(members()).toEqual(before);
    // rec's tasks move to backend b: only their group is left and joined again.
    await intake.leaveFor(planOf(3, 'a', 'b'));
    expect(members()).toEqual({ g: before.g, [taskGroup('g', 'rec')]: [] });
    await intake.join(planOf(3, 'a', 'b'));
    const after = members();
    expect(after.g).toEqual(before.g);
    expect(after[taskGroup('g', 'rec')]).toHaveLength(1);
    expect(after[taskGroup('g', 'rec')]).not.toEqual(before[taskGroup('g', 'rec')]);
    // Alone in its groups, it still takes every partition (no member of b to deal to).
    expect(intake.partitions()).toBe(8);
    await intake.close();
    await bus.close();
  });
});
