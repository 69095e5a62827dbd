/**
 * A group member on Kafka with the memory bus's delivery rules (see `../types.ts`):
 *
 * - Kafka's fetched batch is cut into handler batches of at most `maxBatchSize` records. After a
 *   handler batch resolves its offset is committed at once, and only once the commit succeeded is
 *   it marked consumed, so nothing handled is counted as unhandled for long and nothing unhandled
 *   is ever counted as handled (at-least-once, no auto-commit).
 * - A handler that throws pauses its partition for a growing delay and gets the same records
 *   again when it resumes; the member's other partitions go on meanwhile (kafkajs fetches again
 *   only when every batch of the last fetch has returned, so retrying in place would stall them).
 * - Partitions are consumed concurrently (`partitionsConsumedConcurrently`), as on the memory bus.
 * - `run()` resolves once the member has joined the group and knows its partitions.
 * - kafkajs restarts a consumer that crashed on a retriable error; one that crashed on another
 *   error is reported to `onFatal`, since nothing here can mend it.
 */
import type { Consumer as KafkaConsumer, EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import { roundRobinAssigner, topicPartitionKey } from '../assigners.js';
import type { BatchHandler, BusMessage, Consumer, ConsumerOptions, TopicPartition, TopicPartitionOffset } from '../types.js';
import { toKafkaAssigner } from './assigner.js';

const DEFAULT_MAX_BATCH_SIZE = 100;

export interface KafkaConsumerSettings {
  /** Partitions one member handles at the same time. */
  partitionsConsumedConcurrently: number;
  /** Delay before a failed handler batch is delivered again, doubling up to `retryMaxMs`. */
  retryInitialMs: number;
  retryMaxMs: number;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  onClose: (consumer: Consumer) => void;
  /** The consumer stopped for good on an error kafkajs does not retry. */
  onFatal: (err: unknown, groupId: string) => void;
}

type State = 'created' | 'running' | 'closing' | 'closed';

export function createKafkaConsumer(kafka: Kafka, options: ConsumerOptions, settings: KafkaConsumerSettings): Consumer {
  const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
    throw new PanoptesError(ErrorCode.BusInvalidArgument, `maxBatchSize must be a positive integer, got ${maxBatchSize}`);
  }
  let state: State = 'created';
  const consumer: KafkaConsumer = kafka.consumer({
    groupId: options.groupId,
    partitionAssigners: [toKafkaAssigner(options.assigner ?? roundRobinAssigner, options.metadata ?? {})],
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: settings.heartbeatIntervalMs,
    allowAutoTopicCreation: false,
    // An idle fetch holds close() and rebalances up to this long.
    maxWaitTimeInMs: 500,
    // Without this, a close() during kafkajs's restart delay would be undone by the restart.
    retry: { restartOnFailure: async () => state === 'running' },
  });
  let memberId = '';
  let assignment: TopicPartition[] = [];
  /** Topics paused through `pause()`: kafkajs forgets them when it restarts a crashed consumer. */
  const pausedTopics = new Set<string>();
  /** Per partition, the delay before its next retry; absent while it succeeds. */
  const retryDelays = new Map<string, number>();

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    memberId = payload.memberId;
    assignment = Object.entries(payload.memberAssignment).flatMap(([topic, partitions]) =>
      partitions.map((partition) => ({ topic, partition })),
    );
    if (pausedTopics.size > 0) consumer.pause([...pausedTopics].map((topic) => ({ topic })));
  });
  consumer.on(consumer.events.REBALANCING, () => {
    assignment = [];
  });

  /** kafkajs refuses pause/resume outside a group; the next GROUP_JOIN applies `pausedTopics`. */
  function whileInGroup(change: () => void): void {
    if (state !== 'running') return;
    try {
      change();
    } catch {
      // Not in a group yet, or between a crash and its restart.
    }
  }

  /** Pauses the partition whose handler failed and resumes it after the partition's delay. */
  function retryLater(payload: EachBatchPayload): void {
    const key = topicPartitionKey({ topic: payload.batch.topic, partition: payload.batch.partition });
    const delayMs = retryDelays.get(key) ?? settings.retryInitialMs;
    retryDelays.set(key, Math.min(delayMs * 2, settings.retryMaxMs));
    const resume = payload.pause();
    setTimeout(() => {
      if (state === 'running') resume();
    }, delayMs).unref();
  }

  return {
    get memberId() {
      return memberId;
    },

    async run(handler: BatchHandler) {
      if (state !== 'created') {
        throw new PanoptesError(ErrorCode.BusInvalidArgument, `consumer of group "${options.groupId}" is already ${state}`);
      }
      state = 'running';
      const joined = new Promise<void>((resolve, reject) => {
        const removeJoin = consumer.on(consumer.events.GROUP_JOIN, () => {
          removeJoin();
          resolve();
        });
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          if (payload.restart || state !== 'running') return;
          reject(payload.error);
          settings.onFatal(payload.error, options.groupId);
        });
      });
      await consumer.connect();
      await consumer.subscribe({ topics: [...options.topics], fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
        eachBatch: async (payload) => {
          const { batch } = payload;
          const messages = batch.messages.map((m) => toBusMessage(batch.topic, batch.partition, m));
          for (let start = 0; start < messages.length; start += maxBatchSize) {
            if (!payload.isRunning() || payload.isStale()) return;
            const chunk = messages.slice(start, start + maxBatchSize);
            try {
              await handler({ topic: batch.topic, partition: batch.partition, messages: chunk });
            } catch {
              // The handler logs its own failures; its records come back after the delay.
              retryLater(payload);
              return;
            }
            retryDelays.delete(topicPartitionKey(batch));
            const last = chunk.at(-1)!.offset;
            // Through the batch's own commit: consumer.commitOffsets skips it once close() began.
            await payload.commitOffsetsIfNecessary({ topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(last + 1) }] }] });
            payload.resolveOffset(String(last));
            await payload.heartbeat();
          }
        },
      });
      await joined;
    },

    pause(topics) {
      for (const topic of topics) pausedTopics.add(topic);
      whileInGroup(() => consumer.pause(topics.map((topic) => ({ topic }))));
    },

    resume(topics) {
      for (const topic of topics) pausedTopics.delete(topic);
      whileInGroup(() => consumer.resume(topics.map((topic) => ({ topic }))));
    },

    assignment() {
      return assignment.map((tp) => ({ ...tp }));
    },

    async commit(offsets: readonly TopicPartitionOffset[]) {
      await consumer.commitOffsets(offsets.map(({ topic, partition, offset }) => ({ topic, partition, offset: String(offset) })));
    },

    async close() {
      if (state === 'closing' || state === 'closed') return;
      state = 'closing';
      try {
        // Waits for the batches in flight, which commit before they return.
        await consumer.disconnect();
      } finally {
        state = 'closed';
        assignment = [];
        settings.onClose(this);
      }
    },
  };
}

function toBusMessage(topic: string, partition: number, message: KafkaMessage): BusMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value !== undefined) headers[name] = (Array.isArray(value) ? value.at(-1) : value)?.toString() ?? '';
  }
  return {
    topic,
    partition,
    offset: Number(message.offset),
    key: message.key?.toString('utf8') ?? '',
    value: message.value ?? new Uint8Array(0),
    headers,
    timestamp: Number(message.timestamp),
  };
}
