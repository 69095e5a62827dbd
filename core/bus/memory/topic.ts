/**
 * A topic: its partition logs, the groups that ever subscribed to it, and the retention rule for
 * a topic no group has subscribed to yet (keep the newest `retentionBytes`, drop the oldest).
 */
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { RecordMetadata, TopicSpec } from '../types.js';
import { PartitionLog, recordBytes } from './partition-log.js';
import { partitionForKey } from '../partitioner.js';

/** Kafka's rule for topic names; the memory bus rejects what a broker would reject. */
const TOPIC_NAME = /^[a-zA-Z0-9._-]{1,249}$/;
const MAX_PARTITIONS = 10_000;

export class Topic {
  readonly name: string;
  readonly partitions: readonly PartitionLog[];
  /**
   * Ids of the groups that ever subscribed. A record stays until each of them has committed past
   * it; a group keeps its place when its last member leaves, so a restarted consumer resumes.
   */
  readonly subscribers = new Set<string>();
  private retainedBytes = 0;
  private appended = 0;

  constructor(
    spec: TopicSpec,
    /** Bound on retained bytes while `subscribers` is empty. */
    private readonly retentionBytes: number,
  ) {
    validateTopicSpec(spec);
    this.name = spec.name;
    this.partitions = Array.from({ length: spec.partitions }, (_, p) => new PartitionLog(p));
  }

  get bytes(): number {
    return this.retainedBytes;
  }

  partition(index: number): PartitionLog {
    const log = this.partitions[index];
    if (!log) {
      throw new PanoptesError(ErrorCode.BusInvalidArgument, `topic "${this.name}" has no partition ${index}`, {
        details: { topic: this.name, partition: index, partitions: this.partitions.length },
      });
    }
    return log;
  }

  append(key: string, value: Uint8Array, headers: Record<string, string>, timestamp: number): RecordMetadata {
    const log = this.partition(partitionForKey(key, this.partitions.length));
    const bytes = recordBytes(key, value, headers);
    const message = { topic: this.name, partition: log.partition, key, value, headers, timestamp };
    const offset = log.append({ message, bytes, seq: this.appended++ });
    this.retainedBytes += bytes;
    if (this.subscribers.size === 0) this.applyRetention();
    return { topic: this.name, partition: log.partition, offset };
  }

  /** Frees the records of `partition` below `offset` (every group has committed past them). */
  release(partition: number, offset: number): void {
    this.retainedBytes -= this.partition(partition).trimBefore(offset);
  }

  /**
   * Nobody will read this topic before a group subscribes, so it behaves like Kafka's size-based
   * retention: drop the oldest records (across partitions) while over the bound, keeping at least
   * the newest one.
   */
  private applyRetention(): void {
    while (this.retainedBytes > this.retentionBytes) {
      let oldest: PartitionLog | undefined;
      let retained = 0;
      for (const log of this.partitions) {
        retained += log.endOffset - log.startOffset;
        const candidate = log.oldest;
        if (candidate && (!oldest?.oldest || candidate.seq < oldest.oldest.seq)) oldest = log;
      }
      if (!oldest || retained <= 1) return;
      this.retainedBytes -= oldest.dropOldest();
    }
  }
}

function validateTopicSpec(spec: TopicSpec): void {
  if (typeof spec.name !== 'string' || !TOPIC_NAME.test(spec.name)) {
    throw new PanoptesError(
      ErrorCode.BusInvalidArgument,
      `topic name ${JSON.stringify(spec.name)} is invalid: expected 1-249 characters of [a-zA-Z0-9._-]`,
      { details: { topic: spec.name } },
    );
  }
  if (!Number.isInteger(spec.partitions) || spec.partitions < 1 || spec.partitions > MAX_PARTITIONS) {
    throw new PanoptesError(
      ErrorCode.BusInvalidArgument,
      `topic "${spec.name}": partitions must be an integer from 1 to ${MAX_PARTITIONS}, got ${String(spec.partitions)}`,
      { details: { topic: spec.name, partitions: spec.partitions } },
    );
  }
}
