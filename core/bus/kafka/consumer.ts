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
 * - kafkajs restarts a consumer that crashed on a retriable error, here after a delay that grows
 *   (to `retryMaxMs`) until a batch is handled again: a broker that lost its topics makes every
 *   restart crash at once, and restarting every 300 ms floods the log. A consumer that crashed on
 *   an error kafkajs does not retry (it calls "Failed to find group coordinator" fatal while the
 *   broker restarts) is restarted here the same way for `restartBudgetMs`; past that it is
 *   reported to `onFatal`, for the process to stop and be restarted by its supervisor.
 * - `close()` waits for the batch in hand at most `closeTimeoutMs`: with the broker away, that
 *   batch's sends and its commit would be retried for a minute. What it leaves uncommitted is
 *   delivered again to the next member (at-least-once).
 */
import type { Consumer as KafkaConsumer, ConsumerRunConfig, EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { Logger } from '../../logger.js';
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
  /** How long a consumer that keeps crashing is restarted before it is reported fatal. */
  restartBudgetMs: number;
  /** Longest `close()` waits for the batch in hand and for leaving the group. */
  closeTimeoutMs: number;
  logger: Logger;
  onClose: (consumer: Consumer) => void;
  /** The consumer stopped for good on an error kafkajs does not retry. */
  onFatal: (err: unknown, groupId: string) => void;
}

type State = 'created' | 'running' | 'closing' | 'closed';

export interface KafkaGroupConsumer extends Consumer {
  /** Stops waiting for anything: `close()` (running or to come) returns at once. */
  abandon(): void;
  /** Topics this member reads. */
  readonly topics: readonly string[];
  /**
   * Reads the given partitions again from the given offsets, where this member holds them. A
   * topic made anew (an empty broker, a deleted topic) starts at offset 0 again, while this
   * member's position is still the old topic's: without this it would skip the new topic's
   * first records, or all of them up to its old position.
   */
  rewind(starts: readonly TopicPartitionOffset[]): void;
}

export function createKafkaConsumer(kafka: Kafka, options: ConsumerOptions, settings: KafkaConsumerSettings): KafkaGroupConsumer {
  const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) {
    throw new PanoptesError(ErrorCode.BusInvalidArgument, `maxBatchSize must be a positive integer, got ${maxBatchSize}`);
  }
  let state: State = 'created';
  /** The delay before the next restart after a crash; back to the first once a batch is handled. */
  let restartDelayMs = settings.retryInitialMs;
  /** When the crashes since the last handled batch began; undefined while healthy. */
  let crashingSince: number | undefined;
  /** Resolved when `close()` begins: a restart waiting out its back-off gives up. */
  let closeBegan = (): void => {};
  const closing = new Promise<void>((resolve) => (closeBegan = resolve));
  /** Resolved by `abandon()`: `close()` stops waiting for kafkajs. */
  let abandon = (): void => {};
  const forced = new Promise<void>((resolve) => (abandon = resolve));
  const backOff = async (): Promise<boolean> => {
    crashingSince ??= Date.now();
    const delayMs = restartDelayMs;
    restartDelayMs = Math.min(restartDelayMs * 2, settings.retryMaxMs);
    await Promise.race([new Promise((resolve) => setTimeout(resolve, delayMs).unref()), closing]);
    return state === 'running';
  };
  const healthy = (): void => {
    restartDelayMs = settings.retryInitialMs;
    crashingSince = undefined;
  };
  const consumer: KafkaConsumer = kafka.consumer({
    groupId: options.groupId,
    partitionAssigners: [toKafkaAssigner(options.assigner ?? roundRobinAssigner, options.metadata ?? {})],
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: settings.heartbeatIntervalMs,
    allowAutoTopicCreation: false,
    // An idle fetch holds close() and rebalances up to this long.
    maxWaitTimeInMs: 500,
    // Waits out the back-off, then restarts unless close() began meanwhile (kafkajs would undo it).
    retry: { restartOnFailure: backOff },
  });
  let runConfig: ConsumerRunConfig | undefined;
  const start = async (): Promise<void> => {
    await consumer.connect();
    await consumer.subscribe({ topics: [...options.topics], fromBeginning: true });
    await consumer.run(runConfig);
  };
  /** After a crash kafkajs will not restart from: again, with the same back-off, within the budget. */
  const restart = async (err: unknown): Promise<void> => {
    if (Date.now() - (crashingSince ?? Date.now()) > settings.restartBudgetMs || !(await backOff())) {
      if (state === 'running') settings.onFatal(err, options.groupId);
      return;
    }
    await start().catch((again: unknown) => restart(again));
  };
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
          crashingSince ??= Date.now();
          // Before the first join, the caller hears of it (a broker never reached fails the start).
          if (!memberId) {
            reject(payload.error);
            settings.onFatal(payload.error, options.groupId);
            return;
          }
          settings.logger.warn({ err: payload.error, groupId: options.groupId }, 'Kafka consumer crashed on an error kafkajs does not retry; restarting it');
          void restart(payload.error);
        });
      });
      runConfig = {
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
            healthy();
            const last = chunk.at(-1)!.offset;
            // Through the batch's own commit: consumer.commitOffsets skips it once close() began.
            await payload.commitOffsetsIfNecessary({ topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(last + 1) }] }] });
            payload.resolveOffset(String(last));
            await payload.heartbeat();
          }
        },
      };
      // Joining retries for a minute while the broker is away; an abandoned consumer stops waiting.
      const gaveUp = forced.then(() => {
        throw new PanoptesError(ErrorCode.BusClosed, `consumer of group "${options.groupId}" abandoned before it joined (the bus closed)`);
      });
      await Promise.race([start().then(() => joined), gaveUp]);
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

    abandon,

    topics: options.topics,

    rewind(starts) {
      for (const { topic, partition, offset } of starts) whileInGroup(() => consumer.seek({ topic, partition, offset: String(offset) }));
    },

    async commit(offsets: readonly TopicPartitionOffset[]) {
      await consumer.commitOffsets(offsets.map(({ topic, partition, offset }) => ({ topic, partition, offset: String(offset) })));
    },

    async close() {
      if (state === 'closing' || state === 'closed') return;
      state = 'closing';
      closeBegan();
      try {
        // Waits for the batches in flight, which commit before they return, within the timeout.
        const ended = await Promise.race([
          consumer.disconnect().then(() => 'closed' as const),
          new Promise<'timed out'>((resolve) => setTimeout(() => resolve('timed out'), settings.closeTimeoutMs).unref()),
          forced.then(() => 'abandoned' as const),
        ]);
        if (ended !== 'closed') {
          const why = ended === 'timed out' ? `not closed within ${settings.closeTimeoutMs} ms` : 'not closed when the bus closed';
          settings.logger.warn({ groupId: options.groupId }, `Kafka consumer ${why} (is the broker reachable?); leaving without it: what it had not committed goes to the next member`);
        }
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
