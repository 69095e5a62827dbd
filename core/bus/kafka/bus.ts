/**
 * The Bus port on Apache Kafka, through kafkajs: the distributed deployment (DESIGN.md §2).
 *
 * Producing: see `producer.ts`. Each record's partition is computed with Kafka's own key hash
 * (`../partitioner.ts`), the same function the memory bus uses, so a source id lands on the same
 * partition on both buses.
 *
 * Consuming: see `consumer.ts`. Topics: see `topics.ts`. A broker that lost records this process
 * produced (replaced by an empty one, a topic deleted): see `loss-watch.ts`.
 *
 * Closing is bounded (`closeTimeoutMs`): with the broker away, kafkajs would retry a commit, a
 * send or leaving the group for a minute, and a stopped process must stop.
 *
 * kafkajs is imported only in this folder (DESIGN.md §3).
 */
import { CompressionTypes, Kafka, logLevel, Partitioners, type Admin } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Bus, BusCloseOptions, ConsumerOptions, TopicPartitionOffset, TopicSpec } from '../types.js';
import { createKafkaConsumer, type KafkaGroupConsumer } from './consumer.js';
import { createKafkaLog } from './kafka-log.js';
import { createLossLedger, type LossProbe, type LossWatchOptions } from './loss-watch.js';
import { startLossReporter } from './loss-reporter.js';
import { createCoalescingProducer, type CoalescingProducer } from './producer.js';
import { createTopicAdmin } from './topics.js';

export interface KafkaBusOptions<N = unknown> {
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
  /** Notice and report records the broker lost (see `loss-watch.ts`). @defaultValue not watched */
  watch?: LossWatchOptions<N>;
  /**
   * Longest `close()` waits for a last loss check, and then for consumers to commit and leave
   * and sends to finish. @defaultValue 3000
   */
  closeTimeoutMs?: number;
  /** How often a repeating kafkajs log line is summarized, ms. @defaultValue 30000 */
  logIntervalMs?: number;
}

type Compression = 'none' | 'gzip';

export interface KafkaBus extends Bus {
  readonly kind: 'kafka';
}

export async function createKafkaBus<N = unknown>(options: KafkaBusOptions<N>): Promise<KafkaBus> {
  const { logger } = options;
  if (options.brokers.length === 0) throw new PanoptesError(ErrorCode.BusInvalidArgument, 'no Kafka brokers given');
  // Rides out a broker restart: retries at most 5 s apart for about connectionRetryMs.
  const connectionRetryMs = options.connectionRetryMs ?? 60_000;
  const connectionRetry = { initialRetryTime: 300, maxRetryTime: 5_000, retries: Math.max(1, Math.ceil(connectionRetryMs / 5_000)) };
  const closeTimeoutMs = options.closeTimeoutMs ?? 3_000;
  const kafkaLog = createKafkaLog(logger, options.logIntervalMs);
  const kafka = new Kafka({
    clientId: options.clientId ?? 'panoptes',
    brokers: [...options.brokers],
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => kafkaLog.write(entry),
    retry: connectionRetry,
  });
  const admin = kafka.admin();
  await admin.connect().catch((err: unknown) => {
    kafkaLog.close();
    throw new PanoptesError(ErrorCode.BusUnavailable, `cannot reach Kafka at ${options.brokers.join(', ')}: ${describeCause(err)}; is the broker running?`, {
      cause: err,
      retriable: true,
      details: { brokers: options.brokers },
    });
  });
  const topics = createTopicAdmin(admin, logger, options.replicationFactor);

  const compressionFor = (topic: string): CompressionTypes => {
    const chosen = typeof options.compression === 'function' ? options.compression(topic) : options.compression;
    return chosen === 'none' ? CompressionTypes.None : CompressionTypes.GZIP;
  };
  const producers = new Set<CoalescingProducer>();
  const consumers = new Set<KafkaGroupConsumer>();
  let closing: Promise<void> | undefined;
  /** Set once the loss reporter's last round is over: from then on nothing new is sent. */
  let shut = false;
  /** A close with no grace, called while an earlier one waits: it gives up waiting at once. */
  let force = (): void => {};
  const forced = new Promise<void>((resolve) => (force = resolve));
  /** Admin calls in flight fail with this once the bus closes, instead of retrying for a minute. */
  let failAdminCalls = (_err: PanoptesError): void => {};
  const busClosed = new Promise<never>((_, reject) => (failAdminCalls = reject));
  busClosed.catch(() => undefined);
  const closedError = (): PanoptesError => new PanoptesError(ErrorCode.BusClosed, 'the Kafka bus is closed');
  const checkOpen = (): void => {
    if (shut) throw closedError();
  };
  const whileOpen = <T>(call: Promise<T>): Promise<T> => Promise.race([call, busClosed]);

  const ledger = options.watch && createLossLedger(options.watch, lossProbe(admin));
  const reporter = ledger && options.watch && startLossReporter({ ledger, watch: options.watch, topics, producers: () => producers, rewind, logger });

  /** Each consumer reading one of `lost` goes back to the start of its partitions of it. */
  async function rewind(lost: readonly string[]): Promise<void> {
    const read = new Set([...consumers].flatMap((c) => c.topics));
    for (const topic of lost.filter((t) => read.has(t))) {
      const starts = (await whileOpen(admin.fetchTopicOffsets(topic))).map(({ partition, low }) => ({ topic, partition, offset: Number(low) }));
      for (const c of consumers) if (c.topics.includes(topic)) c.rewind(starts);
    }
  }

  function producer(): CoalescingProducer {
    checkOpen();
    const created = createCoalescingProducer({
      // Idempotent: a retried request is written once. Retried as long as connections are, so a
      // broker restart is ridden out and a broker gone for good fails the send in the end.
      createProducer: () =>
        kafka.producer({
          idempotent: true,
          maxInFlightRequests: 1,
          allowAutoTopicCreation: false,
          createPartitioner: Partitioners.DefaultPartitioner,
          retry: connectionRetry,
        }),
      partitionCount: (topic) => whileOpen(topics.partitionCount(topic)),
      compressionFor,
      checkOpen,
      onClose: (p) => producers.delete(p as CoalescingProducer),
      ...(ledger ? { onWritten: ledger.produced } : {}),
    });
    producers.add(created);
    return created;
  }

  function consumer(consumerOptions: ConsumerOptions): KafkaGroupConsumer {
    checkOpen();
    const created = createKafkaConsumer(kafka, consumerOptions, {
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 8,
      retryInitialMs: options.retryInitialMs ?? 100,
      retryMaxMs: options.retryMaxMs ?? 5_000,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000,
      heartbeatIntervalMs: Math.max(100, Math.floor((options.sessionTimeoutMs ?? 10_000) / 10)),
      restartBudgetMs: connectionRetryMs,
      closeTimeoutMs,
      logger,
      onClose: (c) => consumers.delete(c as KafkaGroupConsumer),
      onFatal: options.onFatal ?? ((err, groupId) => logger.error({ err, groupId }, 'Kafka consumer stopped on an error it cannot retry')),
    });
    consumers.add(created);
    return created;
  }

  /** A last loss check, then consumers commit and leave and producers finish their sends: each within `graceMs`, else abandoned. */
  async function close(graceMs: number): Promise<void> {
    // The last loss check may still have drops to send.
    await reporter?.stop(graceMs, forced);
    shut = true;
    failAdminCalls(closedError());
    // Taken now: closing takes each out of its set, and those still closing may need abandoning.
    const closingConsumers = [...consumers];
    const closingProducers = [...producers];
    const graceful = (async () => {
      await Promise.allSettled(closingConsumers.map((c) => c.close()));
      await Promise.allSettled(closingProducers.map((p) => p.close()));
    })();
    const inTime = await Promise.race([
      graceful.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), graceMs).unref()),
      forced.then(() => false),
    ]);
    if (!inTime) {
      logger.warn(`Kafka did not let this process close within ${graceMs} ms (is the broker reachable?); leaving: what was not committed is delivered again`);
      for (const c of closingConsumers) c.abandon();
      for (const p of closingProducers) p.abandon();
    }
    await Promise.race([admin.disconnect(), new Promise((resolve) => setTimeout(resolve, 500).unref())]);
    kafkaLog.close();
  }

  return {
    kind: 'kafka',

    async createTopics(specs: readonly TopicSpec[]) {
      checkOpen();
      await whileOpen(topics.create(specs));
    },

    producer,
    consumer,

    async committed(groupId: string, topic: string): Promise<TopicPartitionOffset[]> {
      checkOpen();
      const [offsets] = await whileOpen(admin.fetchOffsets({ groupId, topics: [topic] }));
      return (offsets?.partitions ?? []).map(({ partition, offset }) => ({ topic, partition, offset: Number(offset) }));
    },

    async endOffsets(topic: string): Promise<TopicPartitionOffset[]> {
      checkOpen();
      const offsets = await whileOpen(admin.fetchTopicOffsets(topic));
      return offsets.map(({ partition, high }) => ({ topic, partition, offset: Number(high) }));
    },

    close(closeOptions: BusCloseOptions = {}) {
      const graceMs = closeOptions.graceMs ?? closeTimeoutMs;
      if (graceMs === 0) force();
      closing ??= close(graceMs);
      return closing;
    },
  };
}

/** The ledger's questions, through the admin client. */
function lossProbe(admin: Admin): LossProbe {
  return {
    clusterId: async () => (await admin.describeCluster()).clusterId,
    topics: async () => new Set(await admin.listTopics()),
    async highWatermarks(topic) {
      const offsets = await admin.fetchTopicOffsets(topic);
      return new Map(offsets.map(({ partition, high }) => [partition, Number(high)]));
    },
    async committed(groupId, topic) {
      const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return new Map((offsets?.partitions ?? []).map(({ partition, offset }) => [partition, Number(offset)]));
    },
  };
}

const describeCause = (err: unknown): string => (err instanceof Error ? err.message : String(err));
