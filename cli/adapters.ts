/**
 * What a deployment names and the roles share: its bus and its result store, and the wait for a
 * consumer group to have handled everything sent on some topics.
 */
import { join } from 'node:path';
import { consumerGroupOf, createKafkaBus, createMemoryBus, dropsOnLoss, isFramesTopic, taskTopicModel, type Bus, type CompiledConfig, type Logger, type TopicPartitionOffset } from '../core/index.js';
import { createChdbSink, createClickHouseSink, type ResultSink } from '../sinks/index.js';

/** The bus the deployment names. */
export async function openBus(config: CompiledConfig, logger: Logger, onFatal?: (err: unknown) => void): Promise<Bus> {
  const bus = config.deployment.bus;
  if (bus.kind === 'memory') return createMemoryBus({ maxBytes: bus.maxBytes });
  const kafka: Bus = await createKafkaBus({
    brokers: bus.brokers,
    clientId: bus.clientId,
    logger,
    compression: (topic) => (bus.compression === 'gzip' && !carriesJpeg(topic) ? 'gzip' : 'none'),
    ...(onFatal ? { onFatal } : {}),
    // Records a broker lost before their consumers had them become drops (docs/faults.md).
    watch: dropsOnLoss({ bus: () => kafka, consumerOf: consumerGroupOf, where: 'bus', logger }),
  });
  return kafka;
}

/** The result store the deployment names. */
export function openSink(config: CompiledConfig, options: { logger: Logger; readOnly?: boolean }): ResultSink {
  const sink = config.deployment.sink;
  const { retentionDays } = sink;
  if (sink.kind === 'chdb') return createChdbSink({ path: join(config.dataDir, 'clickhouse'), retentionDays, ...options });
  return createClickHouseSink({
    url: sink.url,
    retentionDays,
    database: sink.database,
    ...(sink.username ? { username: sink.username } : {}),
    ...(sink.password ? { password: sink.password } : {}),
    ...options,
  });
}

/** JPEG does not shrink under gzip; compressing it again only costs CPU on both ends. */
const carriesJpeg = (topic: string): boolean => isFramesTopic(topic) || taskTopicModel(topic) !== undefined;

/**
 * Waits until a group (or each topic's, `group` of the topic) has committed everything produced on the topics. Commits are read
 * before end offsets: a message is committed only after the tasks it fans out to are sent,
 * so those tasks are already counted in the ends read next. Kafka reports a partition without
 * a commit as offset -1. Stops early once `giveUp` says so. An error the client marks retriable
 * (a broker away, a topic being re-created after a broker was replaced), or the client's own
 * retries of one running out, is asked again later, for up to `retryForMs` in a row.
 * `upToNow`: only what was produced before the call (its end offsets are read first, once), for
 * topics that never fall silent (the backends' stats come every second).
 */
export async function waitUntilConsumed(
  bus: Bus,
  group: string | ((topic: string) => string),
  topics: readonly string[],
  giveUp = (): boolean => false,
  { retryForMs = 120_000, upToNow = false }: { retryForMs?: number; upToNow?: boolean } = {},
): Promise<void> {
  let failingSince: number | undefined;
  let endsNow: Offsets | undefined;
  const behindNow = async (): Promise<boolean> => {
    if (upToNow) endsNow ??= await endOffsets(bus, topics);
    return consumerBehind(bus, typeof group === 'string' ? () => group : group, topics, endsNow);
  };
  while (!giveUp()) {
    const behind = await behindNow().catch((err: unknown) => {
      failingSince ??= Date.now();
      if (isTransient(err) && Date.now() - failingSince < retryForMs) return 'unknown';
      throw err;
    });
    if (behind !== 'unknown') failingSince = undefined;
    if (behind === false) return;
    await new Promise((r) => setTimeout(r, behind === 'unknown' ? 500 : 25));
  }
}

type Offsets = TopicPartitionOffset[][];

const endOffsets = (bus: Bus, topics: readonly string[]): Promise<Offsets> => Promise.all(topics.map((topic) => bus.endOffsets(topic)));

const isTransient = (err: unknown): boolean => {
  const { retriable, name, cause } = err as { retriable?: unknown; name?: unknown; cause?: unknown };
  return retriable === true || (name === 'KafkaJSNumberOfRetriesExceeded' && (cause as { retriable?: unknown } | undefined)?.retriable === true);
};

async function consumerBehind(bus: Bus, groupOf: (topic: string) => string, topics: readonly string[], endsNow?: Offsets): Promise<boolean> {
  const committed = await Promise.all(topics.map((topic) => bus.committed(groupOf(topic), topic)));
  const ends = endsNow ?? (await endOffsets(bus, topics));
  return ends.some((partitions, i) => partitions.some((end) => end.offset > Math.max(0, committed[i]!.find((c) => c.partition === end.partition)?.offset ?? 0)));
}
