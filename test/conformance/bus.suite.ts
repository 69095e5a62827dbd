/**
 * The Bus conformance suite: what every adapter (memory, Kafka) must do, per `core/bus/types.ts`.
 *
 * Written to run unchanged against a shared real broker:
 * - every test uses its own topics and groups (random suffix);
 * - waits poll with a deadline (`waitFor`) instead of sleeping, so a fast adapter finishes in
 *   milliseconds and a slow rebalance still passes;
 * - delivery is at-least-once, so assertions de-duplicate by (partition, offset) unless they test
 *   redelivery itself;
 * - nothing assumes whether one member runs handlers for different partitions one at a time or
 *   concurrently, nor how many records a batch holds;
 * - `committed()` may leave out partitions without a commit or report them with a negative offset.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type {
  Batch,
  Bus,
  BusMessage,
  Consumer,
  ConsumerOptions,
  PartitionAssigner,
  ProducerRecord,
  TopicPartition,
} from '../../core/bus/index.js';
import { deadLetter, DeadLetterHeaders, routingAssigner } from '../../core/bus/index.js';
import { ErrorCode } from '../../core/errors.js';
import { deferred, sleep, waitFor } from './wait-for.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function uniqueName(label: string): string {
  return `panoptes-test-${label}-${randomUUID().slice(0, 8)}`;
}

/** Records `<key>#<i>` for i in [from, to) and every key, interleaved by i. */
export function makeRecords(keys: readonly string[], from: number, to: number): ProducerRecord[] {
  const records: ProducerRecord[] = [];
  for (let i = from; i < to; i++) {
    for (const key of keys) records.push({ key, value: encoder.encode(`${key}#${i}`) });
  }
  return records;
}

export function text(message: BusMessage): string {
  return decoder.decode(message.value);
}

/** Messages without the duplicates at-least-once delivery may add. */
function distinct(messages: readonly BusMessage[]): BusMessage[] {
  const seen = new Map<string, BusMessage>();
  for (const m of messages) seen.set(`${m.topic}:${m.partition}:${m.offset}`, m);
  return [...seen.values()];
}

function texts(messages: readonly BusMessage[]): Set<string> {
  return new Set(messages.map(text));
}

function recordTexts(records: readonly ProducerRecord[]): Set<string> {
  return new Set(records.map((record) => decoder.decode(record.value)));
}

function keysNamed(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `source-${i}`);
}

/** A consumer the test started, with what its handler finished without throwing. */
interface Running {
  consumer: Consumer;
  handled: BusMessage[];
}

export function describeBusConformance(name: string, makeBus: () => Promise<Bus>): void {
  describe(`Bus conformance: ${name}`, () => {
    let bus: Bus;
    const consumers = new Set<Consumer>();

    beforeAll(async () => {
      bus = await makeBus();
    });
    afterEach(async () => {
      await Promise.all([...consumers].map((consumer) => consumer.close()));
      consumers.clear();
    });
    afterAll(async () => {
      await bus?.close();
    });

    async function createTopic(label: string, partitions: number): Promise<string> {
      const topic = uniqueName(label);
      await bus.createTopics([{ name: topic, partitions }]);
      return topic;
    }

    async function send(topic: string, records: readonly ProducerRecord[]): Promise<void> {
      const producer = bus.producer();
      try {
        await producer.send(topic, records);
      } finally {
        await producer.close();
      }
    }

    /** Starts a consumer; `before` runs first in the handler and may throw to fail the batch. */
    async function start(options: ConsumerOptions, before?: (batch: Batch) => Promise<void> | void): Promise<Running> {
      const consumer = bus.consumer(options);
      consumers.add(consumer);
      const handled: BusMessage[] = [];
      await consumer.run(async (batch) => {
        await before?.(batch);
        handled.push(...batch.messages);
      });
      return { consumer, handled };
    }

    async function stop(consumer: Consumer): Promise<void> {
      consumers.delete(consumer);
      await consumer.close();
    }

    /** Committed offsets by partition, leaving out partitions without a commit. */
    async function committedOffsets(groupId: string, topic: string): Promise<Map<number, number>> {
      const offsets = await bus.committed(groupId, topic);
      return new Map(offsets.filter((o) => o.offset >= 0).map((o) => [o.partition, o.offset]));
    }

    /** For each partition that got messages: the offset after the last one. */
    function endOffsets(messages: readonly BusMessage[]): Map<number, number> {
      const ends = new Map<number, number>();
      for (const m of messages) ends.set(m.partition, Math.max(ends.get(m.partition) ?? 0, m.offset + 1));
      return ends;
    }

    async function waitForCommitted(groupId: string, topic: string, expected: Map<number, number>): Promise<void> {
      await waitFor(async () => {
        const committed = await committedOffsets(groupId, topic);
        return [...expected].every(([partition, offset]) => committed.get(partition) === offset);
      }, `group ${groupId} to commit ${JSON.stringify([...expected])} on ${topic}`);
    }

    function partitionCount(...members: Consumer[]): number {
      return members.reduce((sum, member) => sum + member.assignment().length, 0);
    }

    it('keeps the order of each key, and each key on one partition', async () => {
      const topic = await createTopic('order', 4);
      const keys = keysNamed(12);
      const producer = bus.producer();
      const metadata = [
        ...(await producer.send(topic, makeRecords(keys, 0, 10))),
        ...(await producer.send(topic, makeRecords(keys, 10, 20))),
        ...(await producer.send(topic, makeRecords(keys, 20, 30))),
      ];
      await producer.close();
      expect(metadata).toHaveLength(keys.length * 30);

      const { handled } = await start({ groupId: uniqueName('order'), topics: [topic] });
      await waitFor(() => distinct(handled).length === keys.length * 30, 'every record');

      const messages = distinct(handled);
      for (const key of keys) {
        const ofKey = messages.filter((m) => m.key === key).sort((a, b) => a.offset - b.offset);
        expect(new Set(ofKey.map((m) => m.partition)).size).toBe(1);
        expect(ofKey.map(text)).toEqual(Array.from({ length: 30 }, (_, i) => `${key}#${i}`));
      }
      // Every record's metadata names the partition and offset it was delivered with.
      const delivered = new Map(messages.map((m) => [text(m), m]));
      makeRecords(keys, 0, 10)
        .concat(makeRecords(keys, 10, 20), makeRecords(keys, 20, 30))
        .forEach((record, index) => {
          const message = delivered.get(decoder.decode(record.value));
          expect(metadata[index]).toEqual({ topic, partition: message?.partition, offset: message?.offset });
        });
    });

    it('reports the right offset to each of many concurrent sends, keeping each key in order', async () => {
      const topic = await createTopic('concurrent', 3);
      const keys = keysNamed(8);
      const producer = bus.producer();
      // Every source sends its next record once the last was stored, all at the same time.
      const sent = await Promise.all(
        keys.map(async (key) => {
          const metadata = [];
          for (let i = 0; i < 25; i++) metadata.push(...(await producer.send(topic, makeRecords([key], i, i + 1))));
          return metadata;
        }),
      );
      await producer.close();

      const { handled } = await start({ groupId: uniqueName('concurrent'), topics: [topic] });
      await waitFor(() => distinct(handled).length === keys.length * 25, 'every record');
      const byPosition = new Map(distinct(handled).map((m) => [`${m.partition}:${m.offset}`, text(m)]));
      keys.forEach((key, k) => {
        expect(sent[k]!.map((m) => byPosition.get(`${m.partition}:${m.offset}`))).toEqual(Array.from({ length: 25 }, (_, i) => `${key}#${i}`));
      });
    });

    it('takes a send larger than a broker batch, and a record of several MB, keeping their order', async () => {
      const topic = await createTopic('large', 2);
      // 40 crops of 100 KB for one source (one partition), then one 8K frame's JPEG of 4 MB.
      // Random bytes, as JPEG's are: compression does not shrink them under the broker's limits.
      const noise = (bytes: number, first: number): Uint8Array => Object.assign(new Uint8Array(randomBytes(bytes)), { 0: first });
      const crops = Array.from({ length: 40 }, (_, i) => ({ key: 'cam', value: noise(100 * 1024, i) }));
      const frame = { key: 'cam', value: noise(4 * 1024 * 1024, 7) };
      const producer = bus.producer();
      const metadata = [...(await producer.send(topic, crops)), ...(await producer.send(topic, [frame]))];
      await producer.close();
      expect(metadata.map((m) => m.offset)).toEqual(Array.from({ length: 41 }, (_, i) => i));
      const { handled } = await start({ groupId: uniqueName('large'), topics: [topic] });
      await waitFor(() => distinct(handled).length === 41, 'every record');
      const messages = distinct(handled).sort((a, b) => a.offset - b.offset);
      expect(messages.map((m) => [m.value.byteLength, m.value[0]])).toEqual([...crops.map((c, i) => [c.value.byteLength, i]), [4 * 1024 * 1024, 7]]);
    });

    it('delivers every record to each group', async () => {
      const topic = await createTopic('groups', 3);
      const records = makeRecords(keysNamed(10), 0, 5);
      await send(topic, records);

      const first = await start({ groupId: uniqueName('group-a'), topics: [topic] });
      const second = await start({ groupId: uniqueName('group-b'), topics: [topic] });
      await waitFor(() => texts(first.handled).size === records.length, 'group a to get every record');
      await waitFor(() => texts(second.handled).size === records.length, 'group b to get every record');
      expect(texts(first.handled)).toEqual(texts(second.handled));
    });

    it('splits the partitions among the members of a group', async () => {
      const topic = await createTopic('split', 6);
      const groupId = uniqueName('split');
      const a = await start({ groupId, topics: [topic] });
      const b = await start({ groupId, topics: [topic] });
      await waitFor(
        () => partitionCount(a.consumer, b.consumer) === 6 && a.consumer.assignment().length > 0 && b.consumer.assignment().length > 0,
        'both members to hold partitions',
      );
      const held = [...a.consumer.assignment(), ...b.consumer.assignment()].map((tp) => tp.partition).sort();
      expect(held).toEqual([0, 1, 2, 3, 4, 5]);

      const records = makeRecords(keysNamed(24), 0, 3);
      await send(topic, records);
      await waitFor(() => texts([...a.handled, ...b.handled]).size === records.length, 'every record');

      const holds = (member: Running, m: BusMessage): boolean =>
        member.consumer.assignment().some((tp) => tp.partition === m.partition);
      expect(a.handled.every((m) => holds(a, m))).toBe(true);
      expect(b.handled.every((m) => holds(b, m))).toBe(true);
    });

    it('gives the partitions of a member that leaves to the others, losing nothing', async () => {
      const topic = await createTopic('leave', 4);
      const groupId = uniqueName('leave');
      const keys = keysNamed(16);
      const a = await start({ groupId, topics: [topic] });
      const b = await start({ groupId, topics: [topic] });
      await waitFor(
        () => partitionCount(a.consumer, b.consumer) === 4 && b.consumer.assignment().length > 0 && a.consumer.assignment().length > 0,
        'both members to hold partitions',
      );

      const before = makeRecords(keys, 0, 3);
      await send(topic, before);
      await waitFor(() => texts([...a.handled, ...b.handled]).size === before.length, 'the first records');
      expect(b.handled.length).toBeGreaterThan(0);

      await stop(b.consumer);
      await waitFor(() => a.consumer.assignment().length === 4, 'the survivor to hold every partition');
      const after = makeRecords(keys, 3, 6);
      await send(topic, after);
      await waitFor(() => [...recordTexts(after)].every((t) => texts(a.handled).has(t)), 'the survivor to get the later records');

      const all = texts([...a.handled, ...b.handled]);
      for (const expected of recordTexts([...before, ...after])) expect(all.has(expected)).toBe(true);
    });

    it('never lets two members handle one partition at the same time', async () => {
      const topic = await createTopic('exclusive', 4);
      const groupId = uniqueName('exclusive');
      const records = makeRecords(keysNamed(20), 0, 10);
      await send(topic, records);

      const active = new Map<number, number>();
      let overlaps = 0;
      const gate = deferred();
      const slowly = async (batch: Batch): Promise<void> => {
        const now = (active.get(batch.partition) ?? 0) + 1;
        active.set(batch.partition, now);
        if (now > 1) overlaps += 1;
        await gate.promise;
        await sleep(joined ? 2 : 200); // slow until the second member is in, so work is left for it
        active.set(batch.partition, (active.get(batch.partition) ?? 1) - 1);
      };
      let joined = false;
      const options = { groupId, topics: [topic], maxBatchSize: 2 };
      const a = await start(options, slowly);
      await waitFor(() => [...active.values()].some((n) => n > 0), 'the first member to hold a batch');
      // The second member joins while the first holds batches: the rebalance must wait for them.
      const joining = start(options, slowly);
      await sleep(300);
      gate.resolve();
      const b = await joining;
      joined = true;
      await waitFor(() => texts([...a.handled, ...b.handled]).size === records.length, 'every record');
      expect(b.handled.length).toBeGreaterThan(0);
      await stop(a.consumer);
      expect(overlaps).toBe(0);
    });

    it('keeps the other partitions moving while one partition\'s handler keeps failing', async () => {
      const topic = await createTopic('stuck', 2);
      const producer = bus.producer();
      // Keys until both partitions have one; the first record's partition is the stuck one.
      const placed = new Map<number, string>();
      for (let i = 0; placed.size < 2; i++) {
        const [metadata] = await producer.send(topic, [{ key: `source-${i}`, value: encoder.encode(`first of source-${i}`) }]);
        if (!placed.has(metadata!.partition)) placed.set(metadata!.partition, `source-${i}`);
      }
      const [stuck, moving] = [...placed.keys()];
      const { handled } = await start({ groupId: uniqueName('stuck'), topics: [topic] }, (batch) => {
        if (batch.partition === stuck) throw new Error('this partition always fails');
      });
      await producer.send(topic, [{ key: placed.get(moving!)!, value: encoder.encode('later') }]);
      await producer.close();
      await waitFor(() => texts(handled).has('later'), 'the record on the healthy partition');
      expect(handled.every((m) => m.partition === moving)).toBe(true);
    });

    it('delivers a batch again when its handler throws', async () => {
      const topic = await createTopic('retry', 1);
      const groupId = uniqueName('retry');
      const records = makeRecords(keysNamed(1), 0, 10);
      await send(topic, records);

      const attempts: BusMessage[][] = [];
      const { handled } = await start({ groupId, topics: [topic] }, (batch) => {
        attempts.push([...batch.messages]);
        if (attempts.length === 1) throw new Error('first delivery fails');
      });
      await waitForCommitted(groupId, topic, new Map([[0, 10]]));

      expect(texts(handled)).toEqual(recordTexts(records));
      const failed = attempts[0] ?? [];
      const retried = attempts.slice(1).flat();
      for (const m of failed) expect(retried.some((r) => r.offset === m.offset && text(r) === text(m))).toBe(true);
    });

    it('delivers records that were handled but not committed to the next consumer of the group', async () => {
      const topic = await createTopic('restart', 1);
      const groupId = uniqueName('restart');
      const records = makeRecords(keysNamed(1), 0, 5);
      await send(topic, records);

      const seen: BusMessage[] = [];
      const crashing = await start({ groupId, topics: [topic] }, (batch) => {
        seen.push(...batch.messages);
        throw new Error('handled, then failed before the commit');
      });
      await waitFor(() => seen.length > 0, 'the first consumer to see records');
      await stop(crashing.consumer);
      expect([...(await committedOffsets(groupId, topic)).values()].every((offset) => offset === 0)).toBe(true);

      const next = await start({ groupId, topics: [topic] });
      await waitFor(() => texts(next.handled).size === records.length, 'the next consumer to get every record');
      for (const m of seen) expect(texts(next.handled).has(text(m))).toBe(true);
    });

    it('resumes at the committed offset after a restart', async () => {
      const topic = await createTopic('resume', 2);
      const groupId = uniqueName('resume');
      const keys = keysNamed(6);
      const first = makeRecords(keys, 0, 2);
      await send(topic, first);
      const one = await start({ groupId, topics: [topic] });
      await waitFor(() => texts(one.handled).size === first.length, 'the first records');
      await waitForCommitted(groupId, topic, endOffsets(one.handled));
      await stop(one.consumer);

      const second = makeRecords(keys, 2, 4);
      await send(topic, second);
      const two = await start({ groupId, topics: [topic] });
      await waitFor(() => texts(two.handled).size === second.length, 'the later records');
      expect(texts(two.handled)).toEqual(recordTexts(second));
    });

    it('commits after each handled batch', async () => {
      const topic = await createTopic('commits', 2);
      const groupId = uniqueName('commits');
      const records = makeRecords(keysNamed(8), 0, 3);
      await send(topic, records);
      expect(await committedOffsets(groupId, topic)).toEqual(new Map());

      const { handled } = await start({ groupId, topics: [topic] });
      await waitFor(() => texts(handled).size === records.length, 'every record');
      await waitForCommitted(groupId, topic, endOffsets(handled));
    });

    it('commits explicitly, and the next consumer of the group starts there', async () => {
      const topic = await createTopic('explicit', 1);
      const groupId = uniqueName('explicit');
      const one = await start({ groupId, topics: [topic] });
      one.consumer.pause([topic]); // nothing is handled, so only the explicit commit moves the offset
      await send(topic, makeRecords(keysNamed(1), 0, 5));
      await waitFor(() => one.consumer.assignment().length === 1, 'the member to hold the partition');

      await one.consumer.commit([{ topic, partition: 0, offset: 2 }]);
      expect(await committedOffsets(groupId, topic)).toEqual(new Map([[0, 2]]));
      await stop(one.consumer);
      expect(one.handled).toEqual([]);

      const two = await start({ groupId, topics: [topic] });
      await waitFor(() => distinct(two.handled).length === 3, 'the records from the committed offset');
      expect(distinct(two.handled).map((m) => m.offset).sort()).toEqual([2, 3, 4]);
    });

    it('pauses and resumes delivery of a topic', async () => {
      const pausedTopic = await createTopic('paused', 1);
      const otherTopic = await createTopic('unpaused', 1);
      const { consumer, handled } = await start({ groupId: uniqueName('pause'), topics: [pausedTopic, otherTopic] });
      consumer.pause([pausedTopic]);

      const records = makeRecords(keysNamed(3), 0, 3);
      await send(pausedTopic, records);
      await send(otherTopic, [{ key: 'marker', value: encoder.encode('marker') }]);
      // The marker, sent after the paused records, arrives; the paused records do not.
      await waitFor(() => texts(handled).has('marker'), 'the unpaused topic to be delivered');
      expect(handled.filter((m) => m.topic === pausedTopic)).toEqual([]);

      consumer.resume([pausedTopic]);
      await waitFor(() => texts(handled.filter((m) => m.topic === pausedTopic)).size === records.length, 'the paused records after resume');
    });

    it('obeys a custom partition assigner', async () => {
      const topic = await createTopic('assigner', 4);
      const groupId = uniqueName('assigner');
      const seenMetadata: string[] = [];
      // Everything to the member announcing role=primary; to the first member by id when none does.
      const primaryTakesAll: PartitionAssigner = {
        name: 'primary-takes-all',
        assign({ members, partitions }) {
          for (const member of members) seenMetadata.push(member.metadata.role ?? '');
          const sorted = [...members].sort((x, y) => (x.memberId < y.memberId ? -1 : 1));
          const primary = members.find((m) => m.metadata.role === 'primary') ?? sorted[0];
          return new Map<string, TopicPartition[]>(
            members.map((m) => [m.memberId, m === primary ? partitions.map((tp) => ({ ...tp })) : []]),
          );
        },
      };
      const options = { groupId, topics: [topic], assigner: primaryTakesAll };
      const secondary = await start({ ...options, metadata: { role: 'secondary' } });
      await waitFor(() => secondary.consumer.assignment().length === 4, 'the only member to hold every partition');
      const primary = await start({ ...options, metadata: { role: 'primary' } });
      await waitFor(
        () => primary.consumer.assignment().length === 4 && secondary.consumer.assignment().length === 0,
        'the primary to take every partition',
      );
      expect(seenMetadata).toContain('primary');
      expect(seenMetadata).toContain('secondary');

      const records = makeRecords(keysNamed(12), 0, 2);
      await send(topic, records);
      await waitFor(() => texts(primary.handled).size === records.length, 'the primary to get every record');
      expect(secondary.handled).toEqual([]);
    });

    it('splits partitions by the routing weights its members announce', async () => {
      const topic = await createTopic('routing', 8);
      const groupId = uniqueName('routing');
      const options = { groupId, topics: [topic], assigner: routingAssigner(() => ({ big: 3, small: 1 })) };
      const big = await start({ ...options, metadata: { backend: 'big' } });
      const small = await start({ ...options, metadata: { backend: 'small' } });
      await waitFor(
        () => big.consumer.assignment().length === 6 && small.consumer.assignment().length === 2,
        'the partitions to be split 6:2',
      );
    });

    it('finishes and commits the batch in flight before close() resolves', async () => {
      const topic = await createTopic('close', 1);
      const groupId = uniqueName('close');
      await send(topic, makeRecords(keysNamed(1), 0, 3));

      const gate = deferred();
      const events: string[] = [];
      let inFlight: readonly BusMessage[] = [];
      const { consumer } = await start({ groupId, topics: [topic] }, async (batch) => {
        if (events.length > 0) return;
        inFlight = batch.messages;
        events.push('handler started');
        await gate.promise;
        events.push('handler finished');
      });
      await waitFor(() => events.length > 0, 'the handler to start');

      const closed = stop(consumer).then(() => events.push('closed'));
      await sleep(100); // a close() that did not wait would resolve within this time
      gate.resolve();
      await closed;
      expect(events).toEqual(['handler started', 'handler finished', 'closed']);
      const last = inFlight.at(-1);
      expect((await committedOffsets(groupId, topic)).get(0)).toBe((last?.offset ?? -1) + 1);
    });

    it('sends an undecodable message to the dead-letter topic with the reason, and goes on', async () => {
      const topic = await createTopic('input', 1);
      const deadTopic = await createTopic('dead', 1);
      const good = (n: number): ProducerRecord => ({ key: 'source-0', value: encoder.encode(JSON.stringify({ n })) });
      const bad: ProducerRecord = { key: 'source-0', value: encoder.encode('{not json'), headers: { origin: 'camera' } };
      await send(topic, [good(1), bad, good(2)]);

      const decoded: unknown[] = [];
      const producer = bus.producer();
      try {
        await start({ groupId: uniqueName('dead'), topics: [topic] }, async (batch) => {
          const dead: ProducerRecord[] = [];
          for (const message of batch.messages) {
            try {
              decoded.push(JSON.parse(text(message)));
            } catch (err) {
              dead.push(deadLetter(message, 'test-stage', (err as Error).message));
            }
          }
          if (dead.length > 0) await producer.send(deadTopic, dead);
        });
        const letters = await start({ groupId: uniqueName('dead-reader'), topics: [deadTopic] });
        await waitFor(() => decoded.length === 2 && letters.handled.length > 0, 'the good messages and the dead letter');

        expect(decoded).toEqual([{ n: 1 }, { n: 2 }]);
        const [letter] = distinct(letters.handled);
        expect(text(letter!)).toBe('{not json');
        expect(letter!.key).toBe('source-0');
        expect(letter!.headers).toMatchObject({
          origin: 'camera',
          [DeadLetterHeaders.stage]: 'test-stage',
          [DeadLetterHeaders.topic]: topic,
          [DeadLetterHeaders.partition]: '0',
          [DeadLetterHeaders.offset]: '1',
        });
        expect(letter!.headers[DeadLetterHeaders.reason]).toMatch(/JSON/);
      } finally {
        await producer.close();
      }
    });

    it('rejects a send to a topic that does not exist, naming it', async () => {
      const missing = uniqueName('missing');
      const producer = bus.producer();
      try {
        await expect(producer.send(missing, makeRecords(['k'], 0, 1))).rejects.toMatchObject({ code: ErrorCode.BusUnknownTopic });
        await expect(producer.send(missing, makeRecords(['k'], 0, 1))).rejects.toThrow(missing);
      } finally {
        await producer.close();
      }
    });

    it('rejects sends once the bus is closed', async () => {
      const own = await makeBus();
      const topic = uniqueName('closed');
      await own.createTopics([{ name: topic, partitions: 1 }]);
      const producer = own.producer();
      await producer.send(topic, [{ key: 'k', value: encoder.encode('before close') }]);
      await own.close();
      await expect(producer.send(topic, [{ key: 'k', value: encoder.encode('after close') }])).rejects.toMatchObject({
        code: ErrorCode.BusClosed,
      });
    });
  });
}
