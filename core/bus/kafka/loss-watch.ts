/**
 * Notices when Kafka lost records this process produced, so that what was lost is said (as
 * drops, by the caller) instead of vanishing.
 *
 * Kafka keeps a record until its retention ends, and a group's committed offset says it was
 * consumed. A broker replaced by an empty one (its data disk wiped, a new cluster formatted), a
 * topic deleted, or a log truncated breaks that: records produced but not yet consumed are gone,
 * and neither the producer nor the consumer is told. So this ledger remembers, per partition,
 * a small note for every record the producer wrote and the broker acknowledged, forgets it once
 * the topic's consuming group has committed past it, and checks every `intervalMs`:
 *
 * - the cluster id (`broker-replaced`): a freshly formatted broker has a new one;
 * - that each topic with notes still exists (`topic-deleted`);
 * - that no partition's end (high watermark) is below an offset the broker acknowledged to us
 *   (`log-truncated`): the log went backwards.
 *
 * The notes still held when one of these is seen are the records that may be lost: produced and
 * not seen committed by their consumers. They are handed to `onLost` by `loss-reporter.ts` (a record committed in the
 * last interval before the loss is reported too: "possibly lost" errs on the side of saying).
 * Checks that fail because the broker is unreachable are skipped: a restart loses nothing.
 */
import type { ProducerRecord, RecordMetadata } from '../types.js';

/** Why records were lost; the stable reason code of their drops. */
export type LossReason = 'broker-replaced' | 'topic-deleted' | 'log-truncated';

export interface LostRecord<N> {
  topic: string;
  partition: number;
  offset: number;
  note: N;
}

export interface BusLoss<N> {
  reason: LossReason;
  /** What was seen, for operators: the cluster ids, or the offsets that went backwards. */
  detail: string;
  /** Topics whose notes are reported (and which must exist again). */
  topics: string[];
  records: LostRecord<N>[];
  /** Records produced, unconsumed and lost that the ledger had no room to remember. */
  unrecorded: number;
}

/** What a process asks the Kafka bus to watch; see the module comment. */
export interface LossWatchOptions<N> {
  /** The note kept for a record (small: not its image); undefined: the record is not watched. */
  note(topic: string, record: ProducerRecord): N | undefined;
  /** The group that consumes a topic; its commits are what makes a record safe. */
  consumerOf(topic: string): string | undefined;
  /** Called once per loss, after the bus made the lost topics exist again. */
  onLost(loss: BusLoss<N>): Promise<void>;
  /** @defaultValue 1000 */
  intervalMs?: number;
  /** Notes kept per topic; beyond it the oldest are counted only. @defaultValue 200000 */
  maxNotes?: number;
}

/** What the ledger needs from Kafka's admin client; each call may fail while the broker is away. */
export interface LossProbe {
  clusterId(): Promise<string>;
  /** The names of the topics the broker has. */
  topics(): Promise<Set<string>>;
  /** Per partition, the offset the next record will get. */
  highWatermarks(topic: string): Promise<Map<number, number>>;
  /** The group's committed offset per partition (absent: none). */
  committed(groupId: string, topic: string): Promise<Map<number, number>>;
}

interface TopicLedger<N> {
  /** Per partition, notes in offset order. */
  partitions: Map<number, LostRecord<N>[]>;
  count: number;
  forgotten: number;
}

export interface LossLedger<N> {
  /** Records the broker acknowledged; `metadata[i]` is where `records[i]` went. */
  produced(topic: string, records: readonly ProducerRecord[], metadata: readonly RecordMetadata[]): void;
  /**
   * One round of checks, of the topics with notes and of `expected` (the topics this process
   * made: one deleted is a loss even when nothing of ours was on it). Resolves with the loss it
   * found, whose notes it no longer holds; otherwise forgets what was consumed.
   */
  check(expected?: readonly string[]): Promise<BusLoss<N> | undefined>;
  /** Notes held now, per topic (for tests and status). */
  held(): Record<string, number>;
}

export function createLossLedger<N>(options: LossWatchOptions<N>, probe: LossProbe): LossLedger<N> {
  const maxNotes = options.maxNotes ?? 200_000;
  const topics = new Map<string, TopicLedger<N>>();
  let clusterId: string | undefined;

  const ledgerOf = (topic: string): TopicLedger<N> => {
    let ledger = topics.get(topic);
    if (!ledger) topics.set(topic, (ledger = { partitions: new Map(), count: 0, forgotten: 0 }));
    return ledger;
  };

  /** Takes every note of the given topics out of the ledger, as a loss. */
  const take = (reason: LossReason, detail: string, lostTopics: string[]): BusLoss<N> => {
    const loss: BusLoss<N> = { reason, detail, topics: lostTopics, records: [], unrecorded: 0 };
    for (const topic of lostTopics) {
      const ledger = topics.get(topic);
      if (!ledger) continue;
      for (const notes of ledger.partitions.values()) loss.records.push(...notes);
      loss.unrecorded += ledger.forgotten;
      topics.delete(topic);
    }
    return loss;
  };

  /** Undefined while the broker does not answer: nothing is concluded from silence. */
  const quietly = <T>(p: Promise<T>): Promise<T | undefined> => p.catch(() => undefined);

  async function findLoss(expected: readonly string[]): Promise<BusLoss<N> | undefined> {
    const id = await quietly(probe.clusterId());
    if (id === undefined) return undefined;
    if (clusterId !== undefined && id !== clusterId) {
      const before = clusterId;
      clusterId = id;
      return take('broker-replaced', `the broker is a new Kafka cluster (id ${before} → ${id}): its topics and offsets are gone`, [...new Set([...topics.keys(), ...expected])]);
    }
    clusterId = id;
    const existing = await quietly(probe.topics());
    if (!existing) return undefined;
    const gone = [...new Set([...topics.keys(), ...expected])].filter((topic) => !existing.has(topic));
    if (gone.length > 0) return take('topic-deleted', `topic${gone.length === 1 ? '' : 's'} ${gone.join(', ')} no longer exist${gone.length === 1 ? 's' : ''} on the broker`, gone);
    for (const [topic, ledger] of topics) {
      // Only what was acknowledged before the question is asked: a record acknowledged while
      // the answer travels is past the end the broker reports, and is not lost.
      const written = new Map([...ledger.partitions].map(([partition, notes]) => [partition, notes.at(-1)?.offset ?? -1]));
      const highs = await quietly(probe.highWatermarks(topic));
      if (!highs) return undefined; // unreachable: try again next round
      for (const [partition, last] of written) {
        const high = highs.get(partition) ?? 0;
        if (last >= 0 && high <= last) {
          return take('log-truncated', `partition ${partition} of ${topic} ends at offset ${high}, but offset ${last} was written to it`, [topic]);
        }
      }
    }
    return undefined;
  }

  /** Forgets what each topic's consuming group has committed past. */
  async function prune(): Promise<void> {
    for (const [topic, ledger] of topics) {
      const group = options.consumerOf(topic);
      if (!group) continue;
      const committed = await quietly(probe.committed(group, topic));
      if (!committed) return;
      for (const [partition, notes] of ledger.partitions) {
        const upTo = committed.get(partition) ?? -1;
        const keep = notes.findIndex((n) => n.offset >= upTo);
        const removed = keep < 0 ? notes.length : keep;
        if (removed === 0) continue;
        notes.splice(0, removed);
        ledger.count -= removed;
        if (notes.length === 0) ledger.partitions.delete(partition);
      }
    }
  }

  return {
    produced(topic, records, metadata) {
      records.forEach((record, i) => {
        const where = metadata[i];
        const note = where && options.note(topic, record);
        if (!where || note === undefined) return;
        const ledger = ledgerOf(topic);
        const notes = ledger.partitions.get(where.partition) ?? [];
        notes.push({ topic, partition: where.partition, offset: where.offset, note });
        ledger.partitions.set(where.partition, notes);
        ledger.count += 1;
        if (ledger.count > maxNotes) {
          // The oldest of the longest partition: kept as a count, so a loss still says how many.
          const longest = [...ledger.partitions.values()].reduce((a, b) => (b.length > a.length ? b : a));
          longest.shift();
          ledger.count -= 1;
          ledger.forgotten += 1;
        }
      });
    },

    async check(expected = []) {
      const loss = await findLoss(expected);
      if (!loss) await prune();
      return loss;
    },

    held() {
      return Object.fromEntries([...topics].map(([topic, ledger]) => [topic, ledger.count]));
    },
  };
}
