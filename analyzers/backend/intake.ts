import {
  isBackfillTopic,
  isFramesTopic,
  taskGroup,
  taskTopicModel,
  Channels,
  describeError,
  planWeights,
  routingAssigner,
  Topics,
  type Batch,
  type Bus,
  type BusMessage,
  type Consumer,
  type Logger,
  type Plan,
  type Producer,
} from '../../core/index.js';
import { taskTopics, type DagRunner } from '../dag/index.js';
import { Outbox, type OutboxTally } from './outbox.js';

export interface IntakeOptions {
  id: string;
  bus: Bus;
  /** The frames' group; each model's tasks are consumed in a group of their own (`taskGroup`). */
  groupId: string;
  runner: DagRunner;
  /** Which apps analyze a source's frames, when the frame does not say. */
  appsForSource: (source: string) => readonly string[];
  /** Target batch of a model's session, to size fetches. */
  batchOf: (model: string) => number;
  producer: Producer;
  tally: OutboxTally;
  /** A frame came in for these apps. */
  /** A frame taken in for `apps`; `backfill`: it came on the backfill topic. */
  onFrame: (apps: readonly string[], source: string, backfill: boolean) => void;
  logger: Logger;
}

export interface Intake {
  /** Joins the consumer groups it is not in, under `plan`'s routing (round-robin without one), and consumes. */
  join(plan: Plan | undefined): Promise<void>;
  /**
   * Routes by `next` from now on, and leaves each group (finishing and committing the batch in
   * hand) whose topics `next` routes differently from the routing it joined under, to be joined
   * again (kafkajs has no "rebalance now"). The other groups go on.
   */
  leaveFor(next: Plan): Promise<void>;
  pause(): void;
  close(): Promise<void>;
  /** Partitions of its topics consumed now. */
  partitions(): number;
  /** Messages taken in, by kind. */
  counts(): { frames: number; tasks: number };
}

/** The fewest messages a backend's consumer takes at once (see `messagesPerFetch`). */
const MIN_MESSAGES_PER_FETCH = 16;

/** Topics consumed in one group, the consumer in it, and the routing it joined under. */
interface Group {
  groupId: string;
  topics: string[];
  consumer?: Consumer;
  joinedRouting?: string;
}

/**
 * A backend's intake: consumes frames and the tasks for the apps' child nodes, decodes each
 * message by its contract (an undecodable one goes to the dead-letter topic, with a drop), hands
 * it to the DAG runner, and sends what the batch made before the batch is committed. Partitions
 * are dealt by the plan's routing weights, in a consumer group for the frames and one for each
 * model's tasks.
 */
export function createIntake(options: IntakeOptions): Intake {
  const taskModels = [...new Set(taskTopics(options.runner.apps).map((topic) => taskTopicModel(topic)!))];
  const groups: Group[] = [
    { groupId: options.groupId, topics: [Topics.frames, Topics.backfillFrames] },
    ...taskModels.map((model) => ({ groupId: taskGroup(options.groupId, model), topics: [Topics.tasks(model), Topics.backfillTasks(model)] })),
  ];
  const knownApps = new Set(options.runner.apps.map((a) => a.spec.name));
  const where = `backend:${options.id}`;
  const counts = { frames: 0, tasks: 0 };
  let plan: Plan | undefined;
  /** Weights to two decimals: an epoch's small shifts in rate do not move a partition, nor make every backend rejoin. */
  const routingOf = (topics: readonly string[], p: Plan | undefined): string =>
    JSON.stringify(topics.map((topic) => Object.entries(planWeights(p)(topic) ?? {}).sort().map(([backend, w]) => [backend, w.toFixed(2)])));
  /**
   * Messages handled together: several model batches' worth, so that frames decode and prepare
   * while the batch before them runs (a partition's next messages come only once these are
   * done). One model batch per fetch ran CenterNet at batch 1 about 25% slower on one stream.
   */
  const messagesPerFetch = (): number => Math.max(MIN_MESSAGES_PER_FETCH, 4 * Math.max(1, ...options.runner.models().map(options.batchOf)));

  const handleFrame = async (message: BusMessage, out: Outbox, after: Promise<unknown>, backfill: boolean): Promise<void> => {
    let frame;
    try {
      frame = Channels.frames.decode(message.value);
    } catch (err) {
      return out.undecodable(message, err);
    }
    counts.frames += 1;
    // Each app once: a frame naming one app 20,000 times is one frame for it.
    const apps = [...new Set(frame.apps ?? options.appsForSource(frame.source))].filter((app) => knownApps.has(app));
    options.onFrame(apps, frame.source, backfill);
    await options.runner.runFrame(frame, apps, out, after, backfill);
  };

  const handleTask = async (message: BusMessage, out: Outbox, _after: Promise<unknown>, backfill: boolean): Promise<void> => {
    let task;
    try {
      task = Channels.tasks(taskTopicModel(message.topic) ?? '').decode(message.value);
    } catch (err) {
      return out.undecodable(message, err);
    }
    counts.tasks += 1;
    await options.runner.runTask(task, out, backfill);
  };

  const handle = async (batch: Batch): Promise<void> => {
    const out = new Outbox(where, options.tally, options.logger);
    const handler = isFramesTopic(batch.topic) ? handleFrame : handleTask;
    const backfill = isBackfillTopic(batch.topic);
    // Frames decode and run together, but each makes its rows after the one before it in the
    // batch: trackers see a source's frames in order. A message that fails in a way nobody
    // foresaw becomes a drop: retrying it would fail again and hold up its partition forever.
    let previous: Promise<unknown> = Promise.resolve();
    await Promise.all(
      batch.messages.map((m) => {
        const handled = handler(m, out, previous, backfill).catch((err: unknown) => out.drop('message', 'internal-error', describeError(err), { source: m.key }));
        previous = handled;
        return handled;
      }),
    );
    await out.send(options.producer);
  };

  const join = async (group: Group): Promise<void> => {
    group.joinedRouting = routingOf(group.topics, plan);
    group.consumer = options.bus.consumer({
      groupId: group.groupId,
      topics: group.topics,
      maxBatchSize: messagesPerFetch(),
      metadata: { backend: options.id },
      assigner: routingAssigner((topic) => planWeights(plan)(topic)),
    });
    await group.consumer.run(handle);
  };

  return {
    async join(next) {
      plan = next;
      await Promise.all(groups.filter((g) => !g.consumer).map(join));
    },
    async leaveFor(next) {
      plan = next;
      const moved = groups.filter((g) => g.consumer && routingOf(g.topics, next) !== g.joinedRouting);
      await Promise.all(
        moved.map(async (g) => {
          // Joined afresh by the next join even where the old consumer fails to close.
          const leaving = g.consumer!;
          g.consumer = undefined;
          await leaving.close();
        }),
      );
    },
    pause: () => {
      for (const g of groups) g.consumer?.pause(g.topics);
    },
    close: async () => {
      await Promise.all(groups.map(async (g) => g.consumer?.close()));
    },
    partitions: () => groups.reduce((n, g) => n + (g.consumer?.assignment().length ?? 0), 0),
    counts: () => ({ ...counts }),
  };
}
