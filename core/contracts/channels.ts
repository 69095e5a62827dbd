import type { Contract } from './codec.js';
import { dropContract, frameContract, planContract, resultRowContract, statsContract, taskContract, type Drop, type Frame, type Plan, type ResultRow, type Stats, type Task } from './messages.js';
import { taskTopicModel, Topics } from './topics.js';

/** Consumer groups of the roles that share a topic's work; their commits say a record was handled. */
export const Groups = { backend: 'panoptes.backend', sink: 'panoptes.sink', scheduler: 'panoptes.scheduler' } as const;

/**
 * The group in which backends consume one model's tasks (live and backfill): a group per model's
 * sessions, apart from the frames' (`backendGroup`), so that a plan that moves one model's tasks
 * rebalances only that group, and every other partition keeps being consumed meanwhile.
 */
export const taskGroup = (backendGroup: string, model: string): string => `${backendGroup}.tasks.${model}`;

/**
 * What travels between two stages, bound once: the topic, the contract its records carry, the
 * key that keeps one source's records in order on one partition, and the group of the role
 * that consumes it (absent where every reader keeps a group of its own, as backends do for plans).
 */
export interface Channel<T> {
  readonly topic: string;
  readonly contract: Contract<T>;
  readonly group?: string;
  /** A record for the bus: the message encoded, keyed, with its contract's headers. */
  record(message: T): { key: string; value: Uint8Array; headers: Record<string, string> };
  decode(value: Uint8Array): T;
}

function channel<T>(topic: string, contract: Contract<T>, keyOf: (message: T) => string, group?: string): Channel<T> {
  return {
    topic,
    contract,
    ...(group !== undefined ? { group } : {}),
    record: (message) => ({ key: keyOf(message), value: contract.encode(message), headers: { ...contract.headers } }),
    decode: (value) => contract.decode(value),
  };
}

const taskChannels = new Map<string, Channel<Task>>();

export const Channels = {
  frames: channel<Frame>(Topics.frames, frameContract, (f) => f.source, Groups.backend),
  /** Frames of delay-tolerant sources, apart from live ones (Topics.backfillFrames). */
  backfillFrames: channel<Frame>(Topics.backfillFrames, frameContract, (f) => f.source, Groups.backend),
  /** Crops for the DAG nodes that run `model`, from the backends that ran their parents; a delay-tolerant source's apart. */
  tasks(model: string, backfill = false): Channel<Task> {
    const topic = backfill ? Topics.backfillTasks(model) : Topics.tasks(model);
    let tasks = taskChannels.get(topic);
    if (!tasks) taskChannels.set(topic, (tasks = channel<Task>(topic, taskContract, (t) => t.source, taskGroup(Groups.backend, model))));
    return tasks;
  },
  results: channel<ResultRow>(Topics.results, resultRowContract, (r) => r.source, Groups.sink),
  drops: channel<Drop>(Topics.drops, dropContract, (d) => d.source ?? 'unknown', Groups.sink),
  /** Read by the scheduler (`Groups.scheduler`), the sink, and ingest workers weighing offload, each in a group of its own. */
  stats: channel<Stats>(Topics.stats, statsContract, (s) => s.backend),
  plan: channel<Plan>(Topics.plan, planContract, () => 'plan'),
} as const;

/** The group whose commits say a topic's records were handled (frames and crops: backends; rows and drops: the sink). */
export function consumerGroupOf(topic: string): string | undefined {
  const model = taskTopicModel(topic);
  if (model !== undefined) return Channels.tasks(model).group;
  return [Channels.frames, Channels.backfillFrames, Channels.results, Channels.drops].find((c) => c.topic === topic)?.group;
}
