/**
 * The Bus port on Apache Kafka, through kafkajs: the distributed deployment (DESIGN.md §2).
 *
 * Producing: see `producer.ts`. Each record's partition is computed with Kafka's own key hash
 * (`../partitioner.ts`), the same function the memory bus uses, so a source id lands on the same
 * partition on both buses.
 *
 * Consuming: see `consumer.ts`. Topics are created with their partitions and retention; they are
 * never created implicitly, so a typo in a topic name fails instead of making a new topic.
 *
 * kafkajs is imported only in this folder (DESIGN.md §3).
 */
import { CompressionTypes, Kafka, logLevel, Partitioners, type LogEntry } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Bus, Consumer, ConsumerOptions, Producer, TopicPartitionOffset, TopicSpec } from '../types.js';
import { createKafkaConsumer } from './consumer.js';
import { createCoalescingProducer } from './producer.js';

export interface KafkaBusOptions {
  /** Bootstrap brokers, `host:port`. */
  brokers: readonly string[];
  clientId?: string;
  logger: Logger;
  /** Compression of produced batches, for every topic or per topic. @defaultValue 'gzip' */
  compression?: Compression | ((topic: string) => Compression);
  /** Replication factor of topics this bus creates. @defaultValue the broker's default */
  replicationFactor?: number;
  /** Partitions one consumer handles at the same time. @defaultValue 8 */
  partitionsConsumedConcurrently?: number;
  /** Delay before a failed handler batch is delivered again, doubling per failure. @defaultValue 100 */
  retryInitialMs?: number;
  /** @defaultValue 5000 */
  retryMaxMs?: number;
  /** How long a request to an unreachable broker is retried before the call fails, in ms. @defaultValue 60000 */
  connectionRetryMs?: number;
  /** A consumer that has not heartbeated for this long leaves its group. @defaultValue 10000 */
  sessionTimeoutMs?: number;
  /**
   * A consumer stopped for good on an error kafkajs does not retry; the process should stop and
   * be restarted. @defaultValue logs the error
   */
  onFatal?: (err: unknown, groupId: string) => void;
}

type Compression = 'none' | 'gzip';

export interface KafkaBus extends Bus {
  readonly kind: 'kafka';
}

export async function createKafkaBus(options: KafkaBusOptions): Promise<KafkaBus> {
  const { logger } = options;
  if (options.brokers.length === 0) throw new PanoptesError(ErrorCode.BusInvalidArgument, 'no Kafka brokers given');
  // Rides out a broker restart: retries at most 5 s apart for about connectionRetryMs.
  const connectionRetry = { initialRetryTime: 300, maxRetryTime: 5_000, retries: Math.max(1, Math.ceil((options.connectionRetryMs ?? 60_000) / 5_000)) };
  const kafka = new Kafka({
    clientId: options.clientId ?? 'panoptes',
    brokers: [...options.brokers],
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => logKafka(logger, entry),
    retry: connectionRetry,
  });
  const admin = kafka.admin();
  await admin.connect().catch((err: unknown) => {
    throw new PanoptesError(ErrorCode.BusUnavailable, `cannot reach Kafka at ${options.brokers.join(', ')}: ${describeCause(err)}; is the broker running?`, {
      cause: err,
      retriable: true,
      details: { brokers: options.brokers },
    });
  });

  const compressionFor = (topic: string): CompressionTypes => {
    const chosen = typeof options.compression === 'function' ? options.compression(topic) : options.compression;
    return chosen === 'none' ? CompressionTypes.None : CompressionTypes.GZIP;
  };
  const producers = new Set<Producer>();
  const consumers = new Set<Consumer>();
  const partitionCounts = new Map<string, Promise<number>>();
  let closed = false;

  const checkOpen = (): void => {
    if (closed) throw new PanoptesError(ErrorCode.BusClosed, 'the Kafka bus is closed');
  };

  /** Cached as a promise, so concurrent first sends to a topic wait for one lookup, in order. */
  function partitionCount(topic: string): Promise<number> {
    let count = partitionCounts.get(topic);
    if (!count) {
      count = lookUpPartitions(topic);
      partitionCounts.set(topic, count);
      count.catch(() => partitionCounts.delete(topic));
    }
    return count;
  }

  async function lookUpPartitions(topic: string): Promise<number> {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] }).catch((err: unknown) => {
      if ((err as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw err;
      throw new PanoptesError(ErrorCode.BusUnknownTopic, `topic "${topic}" does not exist on Kafka`, { cause: err, details: { topic } });
    });
    const count = metadata.topics[0]?.partitions.length ?? 0;
    if (count === 0) throw new PanoptesError(ErrorCode.BusUnknownTopic, `topic "${topic}" has no partitions`, { details: { topic } });
    return count;
  }

  /** Polls metadata until every partition of the topics has a leader; unknown-topic answers mean not yet. */
  async function waitForLeaders(topics: string[], timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ready = await admin
        .fetchTopicMetadata({ topics })
        .then((m) => m.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)))
        .catch((err: unknown) => {
          if (/UNKNOWN_TOPIC_OR_PARTITION|LEADER_NOT_AVAILABLE/.test((err as { type?: string }).type ?? '')) return false;
          throw err;
        });
      if (ready) return;
      if (Date.now() > deadline) throw new PanoptesError(ErrorCode.BusUnavailable, `topics ${topics.join(', ')} have no leaders after ${timeoutMs} ms`, { retriable: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  function producer(): Producer {
    checkOpen();
    const created = createCoalescingProducer({
      // Idempotent: a retried request is written once. Retried as long as connections are, so a
      // broker restart is ridden out and a broker gone for good fails the send in the end.
      producer: kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
        retry: connectionRetry,
      }),
      partitionCount,
      compressionFor,
      checkOpen,
      onClose: (p) => producers.delete(p),
    });
    producers.add(created);
    return created;
  }

  function consumer(consumerOptions: ConsumerOptions): Consumer {
    checkOpen();
    const created = createKafkaConsumer(kafka, consumerOptions, {
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 8,
      retryInitialMs: options.retryInitialMs ?? 100,
      retryMaxMs: options.retryMaxMs ?? 5_000,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000,
      heartbeatIntervalMs: Math.max(100, Math.floor((options.sessionTimeoutMs ?? 10_000) / 10)),
      onClose: (c) => consumers.delete(c),
      onFatal: options.onFatal ?? ((err, groupId) => logger.error({ err, groupId }, 'Kafka consumer stopped on an error it cannot retry')),
    });
    consumers.add(created);
    return created;
  }

  return {
    kind: 'kafka',

    async createTopics(specs: readonly TopicSpec[]) {
      checkOpen();
      const existing = new Set(await admin.listTopics());
      const missing = specs.filter((spec) => !existing.has(spec.name));
      if (missing.length > 0) {
        await admin.createTopics({
          // kafkajs waits out LEADER_NOT_AVAILABLE only; a new topic can also be unknown to the
          // metadata for a moment, so leaders are awaited below instead.
          waitForLeaders: false,
          topics: missing.map((spec) => ({
            topic: spec.name,
            numPartitions: spec.partitions,
            ...(options.replicationFactor ? { replicationFactor: options.replicationFactor } : {}),
            configEntries: spec.retentionMs === undefined ? [] : [{ name: 'retention.ms', value: String(spec.retentionMs) }],
          })),
        });
        await waitForLeaders(missing.map((spec) => spec.name));
      }
      for (const spec of specs.filter((s) => existing.has(s.name))) {
        const partitions = await partitionCount(spec.name);
        if (partitions !== spec.partitions) {
          logger.warn({ topic: spec.name, partitions, configured: spec.partitions }, 'topic exists with another partition count; using it as it is');
        }
      }
    },

    producer,
    consumer,

    async committed(groupId: string, topic: string): Promise<TopicPartitionOffset[]> {
      checkOpen();
      const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return (offsets?.partitions ?? []).map(({ partition, offset }) => ({ topic, partition, offset: Number(offset) }));
    },

    async endOffsets(topic: string): Promise<TopicPartitionOffset[]> {
      checkOpen();
      const offsets = await admin.fetchTopicOffsets(topic);
      return offsets.map(({ partition, high }) => ({ topic, partition, offset: Number(high) }));
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...consumers].map((c) => c.close()));
      await Promise.allSettled([...producers].map((p) => p.close()));
      await admin.disconnect();
    },
  };
}

/**
 * kafkajs logs every failed request at ERROR, also those it retries (a coordinator still loading,
 * a broker restarting). What finally fails reaches the caller as a thrown error, so its logs are
 * diagnostics one level down.
 */
const describeCause = (err: unknown): string => (err instanceof Error ? err.message : String(err));

const LEVELS: Record<number, 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'warn',
  [logLevel.WARN]: 'info',
  [logLevel.INFO]: 'debug',
  [logLevel.DEBUG]: 'debug',
};

/** Errors kafkajs retries by itself while a broker starts or a group settles. */
const TRANSIENT = /coordinator is (loading|not available)|not the correct coordinator|leader not available|no leader|rebalanc/i;

function logKafka(logger: Logger, { level, log }: LogEntry): void {
  const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
  const transient = TRANSIENT.test(String(fields.error ?? ''));
  logger[transient ? 'debug' : (LEVELS[level] ?? 'debug')]({ kafka: fields }, `kafka: ${message}`);
}
