/**
 * The memory bus: the `Bus` port in one process, with Kafka's semantics (see `../types.ts`).
 *
 * Memory. Records stay in their partition logs until every group that ever subscribed to the
 * topic has committed past them; then they are released. The bytes held that way (value + key +
 * headers) count against `maxBytes`: a send that would go over waits, first come first served,
 * until consumers commit enough (a single send larger than the whole budget goes through once
 * the bus holds nothing else, rather than waiting forever). A group whose members all left still
 * holds its records, because a restarted consumer resumes from its committed offset; Kafka would
 * expire them by retention time, the memory bus keeps producers waiting instead.
 *
 * Topics no group has subscribed to yet are not counted against `maxBytes`, since nobody could
 * free them; each keeps its newest `maxBytesPerTopicWithoutGroup` bytes and drops the oldest
 * records, as Kafka's size-based retention would. Once a group subscribes, whatever is left
 * counts against `maxBytes` and is kept for that group. `TopicSpec.retentionMs` is not used:
 * retention here is by bytes, not time.
 *
 * Sends made from inside a batch handler of this bus never wait: a stage that consumes and
 * produces can free its input only after its handler returns, so waiting there could deadlock.
 * Backpressure therefore lands on the producers at the edge (ingest), which is where it should.
 */
import { ErrorCode, PanoptesError } from '../../errors.js';
import type {
  Bus,
  Consumer,
  ConsumerOptions,
  Producer,
  ProducerRecord,
  RecordMetadata,
  TopicPartitionOffset,
  TopicSpec,
} from '../types.js';
import { type ConsumerContext, handlerScope, MemoryConsumer } from './consumer.js';
import { Group, type Member } from './group.js';
import { recordBytes } from './partition-log.js';
import { type PendingSend, SendQueue } from './send-queue.js';
import { Topic } from './topic.js';

const MiB = 1024 * 1024;

export interface MemoryBusOptions {
  /**
   * Bytes of records (value + key + headers) the bus may hold for groups that have not consumed
   * them yet; a `send` beyond it waits for consumers to commit.
   * @defaultValue 256 MiB
   */
  maxBytes?: number;
  /**
   * Bytes a topic that no group has subscribed to keeps; older records are dropped.
   * @defaultValue 16 MiB
   */
  maxBytesPerTopicWithoutGroup?: number;
  /**
   * Delay before a batch whose handler threw is delivered again, in ms; doubles per failure.
   * @defaultValue 100
   */
  retryInitialMs?: number;
  /**
   * Longest delay between deliveries of a failing batch, in ms.
   * @defaultValue 5000
   */
  retryMaxMs?: number;
  /**
   * Clock for message timestamps, ms since epoch.
   * @defaultValue Date.now
   */
  now?: () => number;
}

export interface MemoryBus extends Bus {
  readonly kind: 'memory';
  /** Per partition, the offset the next record will get (for lag = end − committed). */
  endOffsets(topic: string): Promise<TopicPartitionOffset[]>;
  /** A snapshot for health pages and tests. */
  status(): MemoryBusStatus;
}

export interface MemoryBusStatus {
  state: 'open' | 'closing' | 'closed';
  maxBytes: number;
  /** Bytes held for groups, counted against `maxBytes`. */
  heldBytes: number;
  /** Sends waiting for room. */
  waitingSends: number;
  topics: Array<{
    name: string;
    /** Groups that ever subscribed; the topic's records are kept until each has committed. */
    groups: string[];
    bytes: number;
    partitions: Array<{ partition: number; startOffset: number; endOffset: number }>;
  }>;
  groups: Array<{ groupId: string; members: string[] }>;
}

export function createMemoryBus(options: MemoryBusOptions = {}): MemoryBus {
  return new InMemoryBus(options);
}

interface ProducerState {
  closed: boolean;
}

interface BusSend extends PendingSend {
  readonly topic: Topic;
  /** What the records will cost the budget once stored. */
  readonly bytes: number;
}

interface ValidRecord {
  key: string;
  value: Uint8Array;
  headers: Record<string, string>;
}

class InMemoryBus implements MemoryBus {
  readonly kind = 'memory' as const;
  private readonly maxBytes: number;
  private readonly maxBytesPerTopicWithoutGroup: number;
  private readonly now: () => number;
  private readonly topics = new Map<string, Topic>();
  private readonly groups = new Map<string, Group>();
  private readonly consumers = new Set<MemoryConsumer>();
  private readonly sendQueue = new SendQueue<BusSend>((send) => this.fits(send));
  private state: 'open' | 'closing' | 'closed' = 'open';
  private closing: Promise<void> | undefined;
  private readonly consumerContext: ConsumerContext;

  constructor(options: MemoryBusOptions) {
    this.maxBytes = positiveInteger('maxBytes', options.maxBytes ?? 256 * MiB);
    this.maxBytesPerTopicWithoutGroup = positiveInteger(
      'maxBytesPerTopicWithoutGroup',
      options.maxBytesPerTopicWithoutGroup ?? 16 * MiB,
    );
    const retry = {
      initialMs: positiveInteger('retryInitialMs', options.retryInitialMs ?? 100),
      maxMs: positiveInteger('retryMaxMs', options.retryMaxMs ?? 5000),
    };
    this.now = options.now ?? Date.now;
    this.consumerContext = {
      topic: (name) => this.topic(name),
      join: (groupId, member) => this.join(groupId, member),
      closed: (consumer) => this.consumers.delete(consumer),
      isClosed: () => this.state !== 'open',
      retry,
    };
  }

  async createTopics(specs: readonly TopicSpec[]): Promise<void> {
    this.assertOpen();
    // Build every topic before adding any, so a bad spec adds none.
    const created = specs.map((spec) => new Topic(spec, this.maxBytesPerTopicWithoutGroup));
    for (const topic of created) {
      const existing = this.topics.get(topic.name);
      if (existing && existing.partitions.length !== topic.partitions.length) {
        throw new PanoptesError(
          ErrorCode.BusInvalidArgument,
          `topic "${topic.name}" exists with ${existing.partitions.length} partitions, not ${topic.partitions.length}`,
          { details: { topic: topic.name } },
        );
      }
    }
    for (const topic of created) if (!this.topics.has(topic.name)) this.topics.set(topic.name, topic);
  }

  producer(): Producer {
    this.assertOpen();
    const producer: ProducerState = { closed: false };
    return {
      send: (topic, records) => this.send(producer, topic, records),
      close: async () => {
        producer.closed = true;
        this.sendQueue.rejectWaiting(closedError('the producer is closed'), producer);
      },
    };
  }

  consumer(options: ConsumerOptions): Consumer {
    this.assertOpen();
    const consumer = new MemoryConsumer(this.consumerContext, options);
    this.consumers.add(consumer);
    return consumer;
  }

  async committed(groupId: string, topic: string): Promise<TopicPartitionOffset[]> {
    if (this.state === 'closed') throw closedError();
    this.topic(topic);
    return this.groups.get(groupId)?.committedFor(topic) ?? [];
  }

  async endOffsets(topic: string): Promise<TopicPartitionOffset[]> {
    if (this.state === 'closed') throw closedError();
    return this.topic(topic).partitions.map((log) => ({ topic, partition: log.partition, offset: log.endOffset }));
  }

  /** Rejects waiting sends, closes every consumer (each finishes its batch in flight), then closes. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  status(): MemoryBusStatus {
    return {
      state: this.state,
      maxBytes: this.maxBytes,
      heldBytes: this.heldBytes(),
      waitingSends: this.sendQueue.length,
      topics: [...this.topics.values()].map((topic) => ({
        name: topic.name,
        groups: [...topic.subscribers],
        bytes: topic.bytes,
        partitions: topic.partitions.map((log) => ({
          partition: log.partition,
          startOffset: log.startOffset,
          endOffset: log.endOffset,
        })),
      })),
      groups: [...this.groups.values()].map((group) => ({ groupId: group.groupId, members: group.memberIds })),
    };
  }

  private async shutdown(): Promise<void> {
    this.state = 'closing';
    this.sendQueue.rejectWaiting(closedError());
    await Promise.all([...this.consumers].map((consumer) => consumer.close()));
    this.state = 'closed';
  }

  private async send(producer: ProducerState, topicName: string, records: readonly ProducerRecord[]): Promise<RecordMetadata[]> {
    const fromHandler = handlerScope.getStore() === this.consumerContext;
    // While closing, handlers still finishing their batch may send; nobody else may.
    if (producer.closed || this.state === 'closed' || (this.state === 'closing' && !fromHandler)) {
      throw closedError(producer.closed ? 'the producer is closed' : undefined);
    }
    const topic = this.topic(topicName);
    const valid = validateRecords(topicName, records);
    if (valid.length === 0) return [];

    return new Promise<RecordMetadata[]>((resolve, reject) => {
      const send: BusSend = {
        producer,
        topic,
        bytes: valid.reduce((sum, r) => sum + recordBytes(r.key, r.value, r.headers), 0),
        store: () => resolve(this.store(topic, valid)),
        reject,
      };
      if (fromHandler) this.sendQueue.storeNow(send);
      else this.sendQueue.enqueue(send);
    });
  }

  private fits(send: BusSend): boolean {
    // A topic without groups never waits: nobody would free its room (it has retention instead).
    if (send.topic.subscribers.size === 0) return true;
    const held = this.heldBytes();
    return held === 0 || held + send.bytes <= this.maxBytes;
  }

  private store(topic: Topic, records: readonly ValidRecord[]): RecordMetadata[] {
    const timestamp = this.now();
    const stored = records.map((r) => topic.append(r.key, r.value, r.headers, timestamp));
    // Wake the owner of each partition that got records, in every group reading the topic.
    const partitions = new Set(stored.map((meta) => meta.partition));
    for (const groupId of topic.subscribers) {
      for (const partition of partitions) this.groups.get(groupId)?.ownerOf({ topic: topic.name, partition })?.wake();
    }
    return stored;
  }

  private join(groupId: string, member: Member): Group {
    let group = this.groups.get(groupId);
    if (!group) {
      group = new Group(groupId, (tpo) => this.release(tpo));
      this.groups.set(groupId, group);
    }
    group.join(member);
    for (const topic of member.topics) topic.subscribers.add(groupId);
    return group;
  }

  /** After a commit: frees what every subscribed group has committed past, then lets sends in. */
  private release({ topic: name, partition }: TopicPartitionOffset): void {
    const topic = this.topic(name);
    let lowest = Number.POSITIVE_INFINITY;
    for (const groupId of topic.subscribers) {
      const committed = this.groups.get(groupId)?.committed({ topic: name, partition });
      lowest = Math.min(lowest, committed ?? 0);
    }
    if (Number.isFinite(lowest)) topic.release(partition, lowest);
    this.sendQueue.drain();
  }

  private heldBytes(): number {
    let bytes = 0;
    for (const topic of this.topics.values()) if (topic.subscribers.size > 0) bytes += topic.bytes;
    return bytes;
  }

  private topic(name: string): Topic {
    const topic = this.topics.get(name);
    if (!topic) {
      throw new PanoptesError(ErrorCode.BusUnknownTopic, `unknown topic "${name}": create it with createTopics first`, {
        details: { topic: name },
      });
    }
    return topic;
  }

  private assertOpen(): void {
    if (this.state !== 'open') throw closedError();
  }
}

function validateRecords(topic: string, records: readonly ProducerRecord[]): ValidRecord[] {
  if (!Array.isArray(records)) throw invalidRecord(topic, 'records must be an array');
  return records.map((record: ProducerRecord, index) => {
    if (typeof record?.key !== 'string') throw invalidRecord(topic, `record ${index}: key must be a string`);
    if (!(record.value instanceof Uint8Array)) throw invalidRecord(topic, `record ${index}: value must be a Uint8Array`);
    const headers = record.headers ?? {};
    for (const [name, text] of Object.entries(headers)) {
      if (typeof text !== 'string') throw invalidRecord(topic, `record ${index}: header "${name}" must be a string`);
    }
    // Copies, as Kafka's serialization would: the producer may reuse its buffer after send. Not
    // zero-filled first: for a message of megabytes that costs more than the copy itself.
    const value = Buffer.allocUnsafeSlow(record.value.length);
    value.set(record.value);
    return { key: record.key, value, headers: { ...headers } };
  });
}

function invalidRecord(topic: string, problem: string): PanoptesError {
  return new PanoptesError(ErrorCode.BusInvalidArgument, `send to "${topic}": ${problem}`, { details: { topic } });
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new PanoptesError(ErrorCode.BusInvalidArgument, `memory bus option ${name} must be a positive integer, got ${String(value)}`, {
      details: { option: name, value },
    });
  }
  return value;
}

function closedError(message = 'the bus is closed'): PanoptesError {
  return new PanoptesError(ErrorCode.BusClosed, message);
}
