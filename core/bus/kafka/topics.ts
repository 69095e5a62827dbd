/**
 * Topics on Kafka: created with their partitions and retention, never implicitly (a typo in a
 * topic name fails instead of making a new topic), and remembered, so that a broker that lost
 * them (see `loss-watch.ts`) gets them back as they were made.
 */
import type { Admin } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { TopicSpec } from '../types.js';

/** The largest record a topic takes (Kafka's `max.message.bytes`). */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;

export interface TopicAdmin {
  /** Creates the missing ones, waits for their leaders, and remembers every spec. */
  create(specs: readonly TopicSpec[]): Promise<void>;
  /** Creates again the remembered topics the broker no longer has; returns their names. */
  recreate(): Promise<string[]>;
  /** Names of the topics this process made (or found) through `create`. */
  known(): string[];
  /** A topic's partition count, looked up once (concurrent first callers share the lookup). */
  partitionCount(topic: string): Promise<number>;
}

export function createTopicAdmin(admin: Admin, logger: Logger, replicationFactor?: number): TopicAdmin {
  const specs = new Map<string, TopicSpec>();
  const partitionCounts = new Map<string, Promise<number>>();

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

  /** Creates what is missing of `wanted`; another process creating one at the same moment is fine. */
  async function createMissing(wanted: readonly TopicSpec[]): Promise<{ missing: TopicSpec[]; existing: Set<string> }> {
    const existing = new Set(await admin.listTopics());
    const missing = wanted.filter((spec) => !existing.has(spec.name));
    if (missing.length === 0) return { missing, existing };
    for (const spec of missing) partitionCounts.delete(spec.name);
    await admin
      .createTopics({
        // kafkajs waits out LEADER_NOT_AVAILABLE only; a new topic can also be unknown to the
        // metadata for a moment, so leaders are awaited below instead.
        waitForLeaders: false,
        topics: missing.map((spec) => ({
          topic: spec.name,
          numPartitions: spec.partitions,
          ...(replicationFactor ? { replicationFactor } : {}),
          configEntries: [
            // A frame of an 8K camera is a JPEG of several MB, over the broker's default of 1 MB a record.
            { name: 'max.message.bytes', value: String(MAX_RECORD_BYTES) },
            ...(spec.retentionMs === undefined ? [] : [{ name: 'retention.ms', value: String(spec.retentionMs) }]),
          ],
        })),
      })
      .catch((err: unknown) => {
        if (!/TOPIC_ALREADY_EXISTS|already exists/i.test(`${(err as { type?: string }).type ?? ''} ${String(err)}`)) throw err;
      });
    await waitForLeaders(missing.map((spec) => spec.name));
    return { missing, existing };
  }

  return {
    async create(wanted) {
      for (const spec of wanted) specs.set(spec.name, spec);
      const { existing } = await createMissing(wanted);
      for (const spec of wanted.filter((s) => existing.has(s.name))) {
        const partitions = await partitionCount(spec.name);
        if (partitions !== spec.partitions) {
          logger.warn({ topic: spec.name, partitions, configured: spec.partitions }, 'topic exists with another partition count; using it as it is');
        }
      }
    },
    async recreate() {
      const { missing } = await createMissing([...specs.values()]);
      return missing.map((spec) => spec.name);
    },
    known: () => [...specs.keys()],
    partitionCount,
  };
}
