/**
 * A producer on Kafka that batches the way Kafka's own Java client does, without its linger
 * delay: sends that arrive while a request is in flight are written together in the next one.
 *
 * Why: the producer is idempotent, which keeps one request in flight per connection (so a retry
 * can never reorder a partition), and kafkajs writes one request per `send` call. Eight cameras
 * each awaiting its frame would then take turns for every round trip; coalesced, they share it.
 * A request holds at most `maxPartitionBytes` (uncompressed) per partition, below the broker's
 * default 1 MB per partition batch: a send larger than that is written in parts, in order, and
 * one record larger than that alone (the topics take records of up to 16 MB).
 *
 * Each record's partition is set here with Kafka's key hash (`../partitioner.ts`), so the offset
 * of every record can be reported from the first offset Kafka gives per partition.
 *
 * A broker replaced by an empty one hands out producer ids from the start again, while it also
 * accepted records under the ids the old cluster gave. A new producer given such an id is refused
 * ("out of order sequence number") for as long as the broker remembers the old one (a day). So a
 * request refused that way is sent again through a new kafkajs producer, which gets the next id;
 * and `renew()` (called when the loss watch sees a new cluster) makes this producer take a new id
 * before its next request.
 */
import type { CompressionTypes, Producer as KafkaProducer } from 'kafkajs';
import { ErrorCode, PanoptesError } from '../../errors.js';
import type { Producer, ProducerRecord, RecordMetadata } from '../types.js';
import { partitionForKey } from '../partitioner.js';

interface PendingSend {
  topic: string;
  records: readonly ProducerRecord[];
  partitions: number[];
  resolve: (metadata: RecordMetadata[]) => void;
  reject: (err: unknown) => void;
}

export interface CoalescingProducerOptions {
  /** Makes a kafkajs producer; called again for a new producer id. */
  createProducer: () => KafkaProducer;
  partitionCount: (topic: string) => Promise<number>;
  compressionFor: (topic: string) => CompressionTypes;
  checkOpen: () => void;
  onClose: (producer: Producer) => void;
  /** Told of every record the broker acknowledged, with where it went (the loss ledger). */
  onWritten?: (topic: string, records: readonly ProducerRecord[], metadata: readonly RecordMetadata[]) => void;
  /** @defaultValue 900 KiB */
  maxPartitionBytes?: number;
}

export interface CoalescingProducer extends Producer {
  /**
   * Gives up at once: the queued sends and the request in flight fail with BusClosed (kafkajs may
   * go on retrying that request in the background; its answer is ignored). For a stop that cannot
   * wait for an unreachable broker.
   */
  abandon(): void;
  /** Takes a new producer id before the next request (the broker is a new cluster). */
  renew(): void;
}

/** Refusals that mean the broker does not know this producer id as this producer: a new id mends them. */
const PRODUCER_ID_REFUSED = /OUT_OF_ORDER_SEQUENCE_NUMBER|UNKNOWN_PRODUCER_ID|INVALID_PRODUCER_EPOCH/;
const ID_ATTEMPTS = 5;

/** kafkajs wraps the broker's error (`type`) in retry errors (`cause`). */
function producerIdRefused(err: unknown): boolean {
  for (let e = err as { type?: string; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (PRODUCER_ID_REFUSED.test(e.type ?? '')) return true;
  }
  return false;
}

export function createCoalescingProducer(options: CoalescingProducerOptions): CoalescingProducer {
  let producer = options.createProducer();
  const maxPartitionBytes = options.maxPartitionBytes ?? 900 * 1024;
  let connected: Promise<void> | undefined;
  let queue: PendingSend[] = [];
  let writing: Promise<void> | undefined;
  /** The sends of the request in flight, failed by `abandon()`. */
  let inFlight: PendingSend[] = [];
  let closing = false;
  let abandoned = (): void => {};
  const gaveUp = new Promise<void>((resolve) => (abandoned = resolve));
  const closedError = (): PanoptesError => new PanoptesError(ErrorCode.BusClosed, 'the producer is closed');

  /** Writes queued sends, a request at a time, until the queue is empty; one writer at a time. */
  function drain(): void {
    if (writing) return;
    writing = writeQueued().finally(() => {
      writing = undefined;
      if (queue.length > 0) drain(); // queued between the last request and this callback
    });
  }

  async function writeQueued(): Promise<void> {
    while (queue.length > 0) {
      const request = takeRequest();
      inFlight = request;
      await write(request).then(
        (metadata) =>
          request.forEach((send, i) => {
            options.onWritten?.(send.topic, send.records, metadata[i]!);
            send.resolve(metadata[i]!);
          }),
        (err: unknown) => request.forEach((send) => send.reject(err)),
      );
      inFlight = [];
    }
  }

  /**
   * The longest run of queued sends with one compression in which no partition's batch grows
   * past `maxPartitionBytes` (the broker refuses a batch over its 1 MB default).
   */
  function takeRequest(): PendingSend[] {
    const compression = options.compressionFor(queue[0]!.topic);
    const bytesPerPartition = new Map<string, number>();
    let count = 0;
    for (const send of queue) {
      if (count > 0 && options.compressionFor(send.topic) !== compression) break;
      const grown = new Map<string, number>();
      send.records.forEach((record, i) => {
        const key = `${send.topic}:${send.partitions[i]}`;
        grown.set(key, (grown.get(key) ?? bytesPerPartition.get(key) ?? 0) + record.value.byteLength + record.key.length);
      });
      if (count > 0 && [...grown.values()].some((bytes) => bytes > maxPartitionBytes)) break;
      for (const [key, bytes] of grown) bytesPerPartition.set(key, bytes);
      count += 1;
    }
    const taken = queue.slice(0, count);
    queue = queue.slice(count);
    return taken;
  }

  /** Consecutive runs of records in which no partition gets more than `maxPartitionBytes` (a record larger than that alone). */
  function fittingParts(records: readonly ProducerRecord[], partitions: readonly number[]): { from: number; to: number }[] {
    const parts: { from: number; to: number }[] = [];
    let bytes = new Map<number, number>();
    let from = 0;
    records.forEach((record, i) => {
      const size = record.value.byteLength + record.key.length;
      if (i > from && (bytes.get(partitions[i]!) ?? 0) + size > maxPartitionBytes) {
        parts.push({ from, to: i });
        [from, bytes] = [i, new Map()];
      }
      bytes.set(partitions[i]!, (bytes.get(partitions[i]!) ?? 0) + size);
    });
    parts.push({ from, to: records.length });
    return parts;
  }

  /** The next request goes through a new kafkajs producer (a new producer id); the old one disconnects. */
  function replaceProducer(): void {
    const old = producer;
    const wasConnected = connected;
    producer = options.createProducer();
    connected = undefined;
    if (wasConnected) void wasConnected.then(() => old.disconnect()).catch(() => undefined);
  }

  async function write(request: PendingSend[]): Promise<RecordMetadata[][]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await writeOnce(request);
      } catch (err) {
        if (attempt >= ID_ATTEMPTS || !producerIdRefused(err)) throw err;
        replaceProducer();
      }
    }
  }

  async function writeOnce(request: PendingSend[]): Promise<RecordMetadata[][]> {
    // A failed connect is forgotten, so the next request tries again once the broker is back.
    connected ??= producer.connect().catch((err: unknown) => {
      connected = undefined;
      throw err;
    });
    await connected;
    const byTopic = new Map<string, { topic: string; messages: { key: string; value: Buffer; partition: number; headers?: Record<string, string> }[] }>();
    for (const { topic, records, partitions } of request) {
      const entry = byTopic.get(topic) ?? { topic, messages: [] };
      records.forEach((record, i) =>
        entry.messages.push({
          key: record.key,
          value: Buffer.from(record.value.buffer, record.value.byteOffset, record.value.byteLength),
          partition: partitions[i]!,
          ...(record.headers ? { headers: record.headers } : {}),
        }),
      );
      byTopic.set(topic, entry);
    }
    const written = await producer.sendBatch({
      acks: -1,
      compression: options.compressionFor(request[0]!.topic),
      topicMessages: [...byTopic.values()],
    });
    // Kafka reports the first offset per partition; the records of a partition follow in order.
    const next = new Map(written.map((w) => [`${w.topicName}:${w.partition}`, Number(w.baseOffset)]));
    return request.map(({ topic, partitions }) =>
      partitions.map((partition) => {
        const key = `${topic}:${partition}`;
        const offset = next.get(key) ?? 0;
        next.set(key, offset + 1);
        return { topic, partition, offset };
      }),
    );
  }

  const self: CoalescingProducer = {
    async send(topic, records) {
      options.checkOpen();
      if (closing) throw closedError();
      if (records.length === 0) return [];
      const count = await options.partitionCount(topic);
      const partitions = records.map((record) => partitionForKey(record.key, count));
      // Queued in parts that each fit the broker's batch, in order: a backend's crops of one busy frame can pass 1 MB in one partition.
      const parts = fittingParts(records, partitions).map(
        ({ from, to }) => new Promise<RecordMetadata[]>((resolve, reject) => queue.push({ topic, records: records.slice(from, to), partitions: partitions.slice(from, to), resolve, reject })),
      );
      drain();
      return (await Promise.all(parts)).flat();
    },
    /** Waits for the sends already made (they succeed or fail within the retry time), then leaves. */
    async close() {
      closing = true;
      const waitForWrites = async (): Promise<void> => {
        while (writing) await writing;
        if (connected) await connected.then(() => producer.disconnect(), () => undefined);
      };
      await Promise.race([waitForWrites(), gaveUp]);
      // Only now: until its writes end, the bus's close may still have to abandon it.
      options.onClose(self);
    },
    renew() {
      if (!writing) replaceProducer();
      else void writing.then(replaceProducer);
    },
    abandon() {
      closing = true;
      abandoned();
      options.onClose(self);
      // A promise settles once: sends resolved already stay resolved.
      for (const send of [...inFlight, ...queue]) send.reject(closedError());
      queue = [];
      void producer.disconnect().catch(() => undefined);
    },
  };
  return self;
}
