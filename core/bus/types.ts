/**
 * The Bus port: what every stage needs from a message bus, with Kafka's semantics.
 *
 * Two adapters implement it: `memory` (in-process, the embedded default) and, later, `kafka`
 * (kafkajs). One conformance suite (test/conformance/bus.*) runs against both.
 *
 * Semantics:
 * - A topic has a fixed number of partitions. A record's partition is chosen from its key
 *   (same key → same partition), so records with one key are consumed in the order produced.
 * - Consumers join a group. Each partition of a subscribed topic is assigned to exactly one
 *   member of the group; the group's `PartitionAssigner` decides which. A member joining or
 *   leaving triggers a rebalance.
 * - Offsets: a member starts each newly assigned partition at the group's committed offset
 *   (or at the earliest retained record when there is none). The handler's batch is
 *   committed only after the handler resolves (at-least-once). A handler that throws does not
 *   commit; the batch is delivered again.
 * - Pause/resume stop and restart delivery for topics without leaving the group.
 * - Backpressure: `send` resolves once the records are stored; when the bus holds too much
 *   unconsumed data it waits until consumers catch up (memory) or the broker accepts (Kafka).
 *
 * Not in the port: transactions, seeking to arbitrary offsets, compaction internals.
 */

export interface TopicSpec {
  name: string;
  partitions: number;
  /** How long records are kept, in ms; undefined means the adapter's default. */
  retentionMs?: number;
}

export interface ProducerRecord {
  /** Partition key: the source id for frames, tasks and rows. */
  key: string;
  value: Uint8Array;
  headers?: Record<string, string>;
}

export interface RecordMetadata {
  topic: string;
  partition: number;
  offset: number;
}

export interface BusMessage {
  topic: string;
  partition: number;
  offset: number;
  key: string;
  value: Uint8Array;
  headers: Record<string, string>;
  /** When the bus stored the record, ms since epoch. */
  timestamp: number;
}

export interface TopicPartition {
  topic: string;
  partition: number;
}

export interface TopicPartitionOffset extends TopicPartition {
  /** The offset of the next record to consume. */
  offset: number;
}

export interface GroupMember {
  memberId: string;
  /** Free-form data the member announced when it joined (e.g. its backend id). */
  metadata: Record<string, string>;
}

/**
 * Decides which member consumes which partition. Pure: the same input gives the same output.
 * Every partition must be given to exactly one member.
 */
export interface PartitionAssigner {
  readonly name: string;
  assign(input: {
    members: readonly GroupMember[];
    partitions: readonly TopicPartition[];
  }): Map<string, TopicPartition[]>;
}

export interface Batch {
  topic: string;
  partition: number;
  messages: readonly BusMessage[];
}

export type BatchHandler = (batch: Batch) => Promise<void>;

export interface ConsumerOptions {
  groupId: string;
  topics: readonly string[];
  /** Defaults to round-robin. */
  assigner?: PartitionAssigner;
  metadata?: Record<string, string>;
  /** Most records handed to one handler call. Default 100. */
  maxBatchSize?: number;
}

export interface Consumer {
  readonly memberId: string;
  /** Joins the group and delivers batches until `close()`. Resolves once joined. */
  run(handler: BatchHandler): Promise<void>;
  pause(topics: readonly string[]): void;
  resume(topics: readonly string[]): void;
  /** Partitions this member holds now. */
  assignment(): TopicPartition[];
  /** Commits explicitly (in addition to the commit after each handled batch). */
  commit(offsets: readonly TopicPartitionOffset[]): Promise<void>;
  /** Leaves the group after the batch in progress; its partitions go to the other members. */
  close(): Promise<void>;
}

export interface Producer {
  send(topic: string, records: readonly ProducerRecord[]): Promise<RecordMetadata[]>;
  close(): Promise<void>;
}

export interface BusCloseOptions {
  /**
   * Longest the close waits for consumers to commit and leave and for sends to finish; then it
   * gives them up (what was not committed is delivered again). @defaultValue the adapter's
   */
  graceMs?: number;
}

export interface Bus {
  readonly kind: 'memory' | 'kafka';
  createTopics(specs: readonly TopicSpec[]): Promise<void>;
  producer(): Producer;
  consumer(options: ConsumerOptions): Consumer;
  /** Committed offsets of a group, for lag and tests. */
  committed(groupId: string, topic: string): Promise<TopicPartitionOffset[]>;
  /** Per partition, the offset the next produced record will get; lag = end − committed. */
  endOffsets(topic: string): Promise<TopicPartitionOffset[]>;
  /** Closes every consumer and producer made here; a second call returns the first's promise. */
  close(options?: BusCloseOptions): Promise<void>;
}
