/**
 * A member of a consumer group on the memory bus, and its delivery loop.
 *
 * Concurrency: a member has at most one batch in flight per partition, and its partitions are
 * handled concurrently: each partition that has records starts its next batch as soon as its
 * previous one is done. That keeps every partition moving (none waits behind a slow one) and lets
 * a handler merge work across partitions (a backend batching frames of many streams into one
 * model run, a sink filling one insert from many partitions). Each batch starts a macrotask
 * later than the event that made it possible, so delivery is asynchronous and a handler that
 * resolves at once cannot starve timers and I/O.
 *
 * Positions: a member delivers a partition from its own position, which starts at the group's
 * committed offset when the partition is assigned to it and moves past each batch the handler
 * finished. As with Kafka, `commit()` moves the committed offset only; the position follows it
 * when the partition is next assigned (a rebalance or a restart).
 *
 * Failures: a handler that throws commits nothing and keeps the position, so the same batch comes
 * back after a delay (initial delay doubling per failure up to a maximum), while the member's
 * other partitions go on. Nothing is logged here: the handler knows what failed and logs it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { ErrorCode, PanoptesError } from '../../errors.js';
import { roundRobinAssigner, topicPartitionKey } from '../assigners.js';
import type {
  BatchHandler,
  Consumer,
  ConsumerOptions,
  PartitionAssigner,
  TopicPartition,
  TopicPartitionOffset,
} from '../types.js';
import type { Group, Member } from './group.js';
import type { Topic } from './topic.js';

const DEFAULT_MAX_BATCH_SIZE = 100;

/** What a consumer needs from its bus. */
export interface ConsumerContext {
  /** The topic by name; throws `BusUnknownTopic`. */
  topic(name: string): Topic;
  /** Adds the member to its group (creating the group) and returns the group. */
  join(groupId: string, member: Member): Group;
  /** The consumer has closed; the bus forgets it. */
  closed(consumer: MemoryConsumer): void;
  isClosed(): boolean;
  retry: { initialMs: number; maxMs: number };
}

/**
 * Set while a batch handler runs, to the context of the bus that called it. The bus lets sends
 * made from inside a handler through without waiting for room: a stage that consumes one topic
 * and produces to another can only free its input after its handler returns, so making it wait
 * for room would deadlock a full bus.
 */
export const handlerScope = new AsyncLocalStorage<ConsumerContext>();

type State = 'created' | 'running' | 'closing' | 'closed';

export class MemoryConsumer implements Consumer, Member {
  readonly memberId: string;
  readonly metadata: Record<string, string>;
  readonly assigner: PartitionAssigner;
  topics: readonly Topic[] = [];

  private readonly groupId: string;
  private readonly topicNames: readonly string[];
  private readonly maxBatchSize: number;
  private state: State = 'created';
  private group: Group | undefined;
  private handler: BatchHandler | undefined;
  private readonly paused = new Set<string>();
  /** Next offset to deliver, for partitions owned without a break since they were assigned. */
  private readonly positions = new Map<string, number>();
  private readonly failures = new Map<string, { count: number; waiting: boolean }>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private readonly batches = new Set<Promise<void>>();
  private wakeLoop: (() => void) | undefined;
  private loop: Promise<void> = Promise.resolve();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly context: ConsumerContext,
    options: ConsumerOptions,
  ) {
    validateConsumerOptions(options);
    this.groupId = options.groupId;
    this.topicNames = [...new Set(options.topics)];
    this.assigner = options.assigner ?? roundRobinAssigner;
    this.metadata = { ...options.metadata };
    this.maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
    this.memberId = `${options.groupId}-${randomUUID()}`;
  }

  async run(handler: BatchHandler): Promise<void> {
    if (this.state === 'running') throw invalidArgument('run() was already called on this consumer');
    if (this.state !== 'created' || this.context.isClosed()) throw closedError();
    this.topics = this.topicNames.map((name) => this.context.topic(name));
    this.handler = handler;
    this.group = this.context.join(this.groupId, this);
    this.state = 'running';
    this.loop = this.deliverUntilClosed();
  }

  pause(topics: readonly string[]): void {
    for (const topic of topics) this.paused.add(this.subscribed(topic));
  }

  resume(topics: readonly string[]): void {
    for (const topic of topics) this.paused.delete(this.subscribed(topic));
    this.wake();
  }

  assignment(): TopicPartition[] {
    return this.state === 'running' && this.group ? this.group.assignmentOf(this) : [];
  }

  async commit(offsets: readonly TopicPartitionOffset[]): Promise<void> {
    if (this.state === 'closed') throw closedError();
    const group = this.group;
    if (!group) throw invalidArgument('commit() before run(): the consumer has not joined its group');
    for (const tpo of offsets) this.checkCommittable(group, tpo);
    for (const { topic, partition, offset } of offsets) group.commit({ topic, partition, offset });
  }

  /**
   * Leaves the group at once, so the other members take over the partitions this one is not
   * working on; partitions with a batch in flight stay claimed until their batch is handled and
   * committed, and only then does this resolve. Do not await it inside the handler: it would
   * wait for itself.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** Member: called by the group after each rebalance. */
  assignmentChanged(): void {
    const owned = new Set(this.assignment().map(topicPartitionKey));
    for (const key of this.positions.keys()) if (!owned.has(key)) this.positions.delete(key);
    for (const key of this.failures.keys()) if (!owned.has(key)) this.failures.delete(key);
    this.wake();
  }

  /** Member: wakes the delivery loop if it is waiting for something to do. */
  wake(): void {
    const wakeLoop = this.wakeLoop;
    this.wakeLoop = undefined;
    wakeLoop?.();
  }

  private async shutdown(): Promise<void> {
    const group = this.state === 'running' ? this.group : undefined;
    this.state = 'closing';
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    group?.leave(this);
    this.wake();
    await this.loop;
    this.state = 'closed';
    this.context.closed(this);
  }

  private async deliverUntilClosed(): Promise<void> {
    while (this.state === 'running') {
      for (const tp of this.assignment()) if (this.isReady(tp)) this.startBatch(tp);
      // Sleep until new records, a rebalance, a finished batch, a resume, a retry timer or
      // close wakes us. No await sits between the scan above and this line, so a wake-up
      // cannot slip in between and get lost.
      await new Promise<void>((resolve) => {
        this.wakeLoop = resolve;
      });
    }
    await Promise.all(this.batches);
  }

  private isReady(tp: TopicPartition): boolean {
    const key = topicPartitionKey(tp);
    return (
      !this.paused.has(tp.topic) &&
      !this.failures.get(key)?.waiting &&
      this.group?.claimantOf(tp) === undefined &&
      this.position(tp) < this.topic(tp.topic).partition(tp.partition).endOffset
    );
  }

  private startBatch(tp: TopicPartition): void {
    const group = this.group;
    if (!group) return;
    // Claimed now, so the next scan skips it and no other member can start on it.
    group.claim(this, tp);
    const batch = this.deliver(group, tp).finally(() => {
      this.batches.delete(batch);
      group.unclaim(this, tp);
    });
    this.batches.add(batch);
  }

  private async deliver(group: Group, tp: TopicPartition): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    const handler = this.handler;
    // Things may have changed during that macrotask.
    if (!handler || this.state !== 'running' || group.ownerOf(tp) !== this || this.paused.has(tp.topic)) return;
    const key = topicPartitionKey(tp);
    const messages = this.topic(tp.topic).partition(tp.partition).read(this.position(tp), this.maxBatchSize);
    const last = messages.at(-1);
    if (!last) return;

    try {
      await handlerScope.run(this.context, () => handler({ topic: tp.topic, partition: tp.partition, messages }));
    } catch {
      this.retryLater(key);
      return;
    }
    this.failures.delete(key);
    // A member that lost the partition meanwhile keeps no position: it would be stale if the
    // partition came back later. The commit stands either way: nobody else has moved it.
    if (group.ownerOf(tp) === this) this.positions.set(key, last.offset + 1);
    group.commit({ ...tp, offset: last.offset + 1 });
  }

  private retryLater(key: string): void {
    if (this.state !== 'running') return; // closing: the next member or run starts from the commit
    const count = (this.failures.get(key)?.count ?? 0) + 1;
    const { initialMs, maxMs } = this.context.retry;
    const delayMs = Math.min(maxMs, initialMs * 2 ** (count - 1));
    const failure = { count, waiting: true };
    this.failures.set(key, failure);
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      failure.waiting = false;
      this.wake();
    }, delayMs);
    this.retryTimers.add(timer);
  }

  /** Where delivery goes on: the own position, else the committed offset, never below the log start. */
  private position(tp: TopicPartition): number {
    const start = this.topic(tp.topic).partition(tp.partition).startOffset;
    const position = this.positions.get(topicPartitionKey(tp)) ?? this.group?.committed(tp) ?? 0;
    return Math.max(position, start);
  }

  private topic(name: string): Topic {
    const topic = this.topics.find((t) => t.name === name);
    if (!topic) throw invalidArgument(`consumer of group "${this.groupId}" is not subscribed to topic "${name}"`);
    return topic;
  }

  private subscribed(topic: string): string {
    if (!this.topicNames.includes(topic)) {
      throw invalidArgument(`consumer of group "${this.groupId}" is not subscribed to topic "${topic}"`);
    }
    return topic;
  }

  private checkCommittable(group: Group, tpo: TopicPartitionOffset): void {
    const log = this.topic(tpo.topic).partition(tpo.partition);
    if (!Number.isInteger(tpo.offset) || tpo.offset < 0 || tpo.offset > log.endOffset) {
      throw invalidArgument(
        `cannot commit offset ${String(tpo.offset)} on ${tpo.topic}/${tpo.partition}: expected an integer from 0 to ${log.endOffset}`,
      );
    }
    if (tpo.offset < log.startOffset) {
      // Kafka would still have those records; here every group had committed past them and
      // they are gone, so a rewind there cannot be honoured.
      throw invalidArgument(
        `cannot commit offset ${tpo.offset} on ${tpo.topic}/${tpo.partition}: records below ${log.startOffset} were released after every group consumed them`,
      );
    }
    if (group.ownerOf(tpo) !== this && group.claimantOf(tpo) !== this) {
      throw invalidArgument(`cannot commit ${tpo.topic}/${tpo.partition}: this member does not hold that partition`);
    }
  }
}

function validateConsumerOptions(options: ConsumerOptions): void {
  if (typeof options.groupId !== 'string' || options.groupId.length === 0) {
    throw invalidArgument('consumer groupId must be a non-empty string');
  }
  if (!Array.isArray(options.topics) || options.topics.length === 0) {
    throw invalidArgument(`consumer of group "${options.groupId}" must subscribe to at least one topic`);
  }
  const size = options.maxBatchSize;
  if (size !== undefined && (!Number.isInteger(size) || size < 1)) {
    throw invalidArgument(`maxBatchSize must be a positive integer, got ${String(size)}`);
  }
}

function invalidArgument(message: string): PanoptesError {
  return new PanoptesError(ErrorCode.BusInvalidArgument, message);
}

function closedError(): PanoptesError {
  return new PanoptesError(ErrorCode.BusClosed, 'the consumer or its bus is closed');
}
