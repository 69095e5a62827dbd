/**
 * A group member on Kafka with the memory bus's delivery rules (see `../types.ts`):
 *
 * - Kafka's fetched batch is cut into handler batches of at most `maxBatchSize` records. After a
 *   handler batch resolves its offset is committed at once, so nothing handled is ever counted
 *   as unhandled and nothing unhandled as handled (at-least-once, no auto-commit).
 * - A handler that throws is called again with the same records after a growing delay, while the
 *   member keeps its partition; it stops retrying when the member closes or loses the partition,
 *   and then the records go to whoever consumes the partition next.
 * - Partitions are consumed concurrently (`partitionsConsumedConcurrently`), as on the memory bus,
 *   so one slow partition does not hold up the others.
 * - `run()` resolves once the member has joined the group and knows its partitions.
 */
import type { Consumer as KafkaConsumer, EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import { roundRobinAssigner } from '../assigners.js';
import type { BatchHandler, BusMessage, Consumer, ConsumerOptions, TopicPartition, TopicPartitionOffset } from '../types.js';
import { toKafkaAssigner } from './assigner.js';

const DEFAULT_MAX_BATCH_SIZE = 100;

export interface KafkaConsumerSettings {
  /** Partitions one member handles at the same time. */
  partitionsConsumedConcurrently: number;
  /** Delay before a failed handler batch is retried, doubling up to `retryMaxMs`. */
  retryInitialMs: number;
  retryMaxMs: number;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  onClose: (consumer: Consumer) => void;
}

type State = 'created' | 'running' | 'closing' | 'closed';

export function createKafkaConsumer(kafka: Kafka, options: ConsumerOptions, settings: KafkaConsumerSettings): Consumer {
  const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
    throw new PanoptesError(ErrorCode.BusInvalidArgument, `maxBatchSize must be a positive integer, got ${maxBatchSize}`);
  }
  const consumer: KafkaConsumer = kafka.consumer({
    groupId: options.groupId,
    partitionAssigners: [toKafkaAssigner(options.assigner ?? roundRobinAssigner, options.metadata ?? {})],
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: settings.heartbeatIntervalMs,
    allowAutoTopicCreation: false,
    // An idle fetch holds close() and rebalances up to this long.
    maxWaitTimeInMs: 500,
  });
  let state: State = 'created';
  let memberId = '';
  let assignment: TopicPartition[] = [];

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    memberId = payload.memberId;
    assignment = Object.entries(payload.memberAssignment).flatMap(([topic, partitions]) =>
      partitions.map((partition) => ({ topic, partition })),
    );
  });
  consumer.on(consumer.events.REBALANCING, () => {
    assignment = [];
  });

  const running = (): boolean => state === 'running';

  async function handleWithRetry(handler: BatchHandler, payload: EachBatchPayload, messages: BusMessage[]): Promise<boolean> {
    const { batch } = payload;
    let delayMs = settings.retryInitialMs;
    for (;;) {
      try {
        await handler({ topic: batch.topic, partition: batch.partition, messages });
        return true;
      } catch {
        // The handler logs its own failures; here the records wait and come back.
        if (!running() || !payload.isRunning() || payload.isStale()) return false;
        await sleep(delayMs);
        delayMs = Math.min(delayMs * 2, settings.retryMaxMs);
        if (!running() || !payload.isRunning() || payload.isStale()) return false;
        await payload.heartbeat();
      }
    }
  }

  return {
    get memberId() {
      return memberId;
    },

    async run(handler) {
      if (state !== 'created') {
        throw new PanoptesError(ErrorCode.BusInvalidArgument, `consumer of group "${options.groupId}" is already ${state}`);
      }
      state = 'running';
      const joined = new Promise<void>((resolve) => {
        const remove = consumer.on(consumer.events.GROUP_JOIN, () => {
          remove();
          resolve();
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
            if (!(await handleWithRetry(handler, payload, chunk))) return;
            const next = String((chunk.at(-1)?.offset ?? 0) + 1);
            payload.resolveOffset(String(chunk.at(-1)?.offset));
            // Through the batch's own commit: consumer.commitOffsets skips it once close() began.
            await payload.commitOffsetsIfNecessary({ topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] });
            await payload.heartbeat();
          }
        },
      });
      await joined;
    },

    pause(topics) {
      consumer.pause(topics.map((topic) => ({ topic })));
    },

    resume(topics) {
      consumer.resume(topics.map((topic) => ({ topic })));
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
