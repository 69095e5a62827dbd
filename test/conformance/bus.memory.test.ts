/**
 * The memory bus: the shared Bus conformance suite, then what only the memory bus does (its
 * memory budget, release and retention, retry delays, argument checks).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryBus, roundRobinAssigner, type Batch, type BusMessage, type Consumer, type MemoryBus, type MemoryBusOptions } from '../../core/bus/index.js';
import { murmur2, partitionForKey } from '../../core/bus/partitioner.js';
import { ErrorCode } from '../../core/errors.js';
import { describeBusConformance, makeRecords, text, uniqueName } from './bus.suite.js';
import { deferred, waitFor } from './wait-for.js';

describeBusConformance('memory', async () => createMemoryBus());

const encoder = new TextEncoder();

/** A record of exactly `bytes` bytes as the budget counts them (key 'k' + value). */
function recordOf(bytes: number, fill = 0): { key: string; value: Uint8Array } {
  return { key: 'k', value: new Uint8Array(bytes - 1).fill(fill) };
}

async function withBus(options: MemoryBusOptions, test: (bus: MemoryBus) => Promise<void>): Promise<void> {
  const bus = createMemoryBus(options);
  try {
    await test(bus);
  } finally {
    await bus.close();
  }
}

async function topicOf(bus: MemoryBus, label: string, partitions = 1): Promise<string> {
  const name = uniqueName(label);
  await bus.createTopics([{ name, partitions }]);
  return name;
}

function collect(consumer: Consumer, before?: (batch: Batch) => Promise<void> | void): { handled: BusMessage[]; running: Promise<void> } {
  const handled: BusMessage[] = [];
  const running = consumer.run(async (batch) => {
    await before?.(batch);
    handled.push(...batch.messages);
  });
  return { handled, running };
}

function partitionStatus(bus: MemoryBus, topic: string, partition = 0): { startOffset: number; endOffset: number } | undefined {
  return bus.status().topics.find((t) => t.name === topic)?.partitions[partition];
}

describe('memory bus: memory budget', () => {
  it('makes a producer beyond maxBytes wait until a consumer commits', () =>
    withBus({ maxBytes: 1000 }, async (bus) => {
      const topic = await topicOf(bus, 'backpressure');
      const gate = deferred();
      const events: string[] = [];
      const consumer = bus.consumer({ groupId: uniqueName('backpressure'), topics: [topic], maxBatchSize: 1 });
      const { running } = collect(consumer, async (batch) => {
        if (batch.messages[0]?.offset === 0) await gate.promise;
        events.push(`handled ${batch.messages[0]?.offset}`);
      });
      await running;

      const producer = bus.producer();
      await producer.send(topic, [recordOf(600)]);
      const second = producer.send(topic, [recordOf(600)]).then(() => events.push('second stored'));
      await waitFor(() => bus.status().waitingSends === 1, 'the second send to wait');
      expect(bus.status().heldBytes).toBe(600);

      gate.resolve();
      await second;
      await waitFor(() => events.length === 3, 'the second record to be handled');
      expect(events).toEqual(['handled 0', 'second stored', 'handled 1']);
    }));

  it('lets one send larger than the whole budget through when the bus holds nothing else', () =>
    withBus({ maxBytes: 100 }, async (bus) => {
      const topic = await topicOf(bus, 'oversize');
      const { handled, running } = collect(bus.consumer({ groupId: uniqueName('oversize'), topics: [topic] }));
      await running;
      await bus.producer().send(topic, [recordOf(500)]);
      await waitFor(() => handled.length === 1, 'the large record');
    }));

  it('releases records once every subscribed group has committed past them', () =>
    withBus({}, async (bus) => {
      const topic = await topicOf(bus, 'release');
      const fast = bus.consumer({ groupId: uniqueName('fast'), topics: [topic] });
      const slow = bus.consumer({ groupId: uniqueName('slow'), topics: [topic] });
      const fastRun = collect(fast);
      const slowRun = collect(slow);
      await Promise.all([fastRun.running, slowRun.running]);
      slow.pause([topic]);

      await bus.producer().send(topic, [recordOf(100), recordOf(100), recordOf(100)]);
      await waitFor(() => fastRun.handled.length === 3, 'the fast group');
      expect(bus.status().heldBytes).toBe(300);
      expect(partitionStatus(bus, topic)).toMatchObject({ startOffset: 0, endOffset: 3 });

      expect(await bus.endOffsets(topic)).toEqual([{ topic, partition: 0, offset: 3 }]);

      slow.resume([topic]);
      await waitFor(() => slowRun.handled.length === 3, 'the slow group');
      await waitFor(() => bus.status().heldBytes === 0, 'the records to be released');
      expect(partitionStatus(bus, topic)).toMatchObject({ startOffset: 3, endOffset: 3 });
    }));

  it('keeps records for a group whose members all left, for its next consumer', () =>
    withBus({}, async (bus) => {
      const topic = await topicOf(bus, 'gone');
      const groupId = uniqueName('gone');
      const first = bus.consumer({ groupId, topics: [topic] });
      await collect(first).running;
      await first.close();

      await bus.producer().send(topic, [recordOf(50), recordOf(50)]);
      expect(bus.status().heldBytes).toBe(100);
      const next = collect(bus.consumer({ groupId, topics: [topic] }));
      await next.running;
      await waitFor(() => next.handled.length === 2, 'the next consumer to get the records');
    }));

  it('keeps the newest records of a topic without groups, outside the budget, and drops the oldest', () =>
    withBus({ maxBytes: 10, maxBytesPerTopicWithoutGroup: 100 }, async (bus) => {
      const topic = await topicOf(bus, 'retention', 2);
      const producer = bus.producer();
      for (let i = 0; i < 10; i++) await producer.send(topic, [{ key: `key-${i}`, value: encoder.encode(`value-${i}-`.padEnd(25, '.')) }]);
      // Each record is 30 bytes; the 3 newest fit in 100 bytes. Nothing waited on maxBytes = 10.
      const status = bus.status().topics.find((t) => t.name === topic);
      expect(status?.bytes).toBe(90);
      expect(bus.status().heldBytes).toBe(0);

      const { handled, running } = collect(bus.consumer({ groupId: uniqueName('late'), topics: [topic] }));
      await running;
      await waitFor(() => handled.length === 3, 'the retained records');
      expect(handled.map((m) => m.key).sort()).toEqual(['key-7', 'key-8', 'key-9']);
    }));

  it('does not hold back sends made from inside a handler, so a consume-and-produce stage cannot deadlock', () =>
    withBus({ maxBytes: 200 }, async (bus) => {
      const input = await topicOf(bus, 'stage-in');
      const output = await topicOf(bus, 'stage-out');
      const downstream = bus.consumer({ groupId: uniqueName('downstream'), topics: [output] });
      await collect(downstream).running;
      downstream.pause([output]); // the output piles up, filling the budget

      const producer = bus.producer();
      const stageGroup = uniqueName('stage');
      const stage = bus.consumer({ groupId: stageGroup, topics: [input] });
      await collect(stage, async (batch) => {
        await producer.send(output, batch.messages.map((m) => ({ key: m.key, value: m.value })));
      }).running;

      await producer.send(input, [recordOf(150, 1)]);
      await waitFor(async () => (await bus.committed(stageGroup, input))[0]?.offset === 1, 'the stage to commit its input');
      expect(bus.status().heldBytes).toBe(150);

      // A producer outside any handler does wait while the output holds the budget.
      const edge = producer.send(input, [recordOf(150, 2)]);
      await waitFor(() => bus.status().waitingSends === 1, 'the edge producer to wait');
      await bus.close();
      await expect(edge).rejects.toMatchObject({ code: ErrorCode.BusClosed });
    }));

  it('copies record values, so a producer may reuse its buffer', () =>
    withBus({}, async (bus) => {
      const topic = await topicOf(bus, 'copy');
      const buffer = encoder.encode('first');
      await bus.producer().send(topic, [{ key: 'k', value: buffer }]);
      buffer.set(encoder.encode('xxxxx'));
      const { handled, running } = collect(bus.consumer({ groupId: uniqueName('copy'), topics: [topic] }));
      await running;
      await waitFor(() => handled.length === 1, 'the record');
      expect(handled.map(text)).toEqual(['first']);
    }));
});

describe('memory bus: delivery', () => {
  it('retries a failing partition with a growing delay while the other partitions go on', () =>
    withBus({ retryInitialMs: 10, retryMaxMs: 40 }, async (bus) => {
      const topic = await topicOf(bus, 'poison', 2);
      const poisonKey = 'poison';
      const poisonPartition = partitionForKey(poisonKey, 2);
      const goodKeys = Array.from({ length: 20 }, (_, i) => `good-${i}`).filter((k) => partitionForKey(k, 2) !== poisonPartition);
      const attempts: number[] = [];
      const { handled, running } = collect(bus.consumer({ groupId: uniqueName('poison'), topics: [topic] }), (batch) => {
        if (batch.partition !== poisonPartition) return;
        attempts.push(performance.now());
        throw new Error('poison');
      });
      await running;
      await bus.producer().send(topic, [{ key: poisonKey, value: encoder.encode('bad') }, ...makeRecords(goodKeys, 0, 5)]);

      await waitFor(() => handled.length === goodKeys.length * 5, 'the healthy partition');
      await waitFor(() => attempts.length >= 5, 'five attempts of the poison batch');
      const gaps = attempts.slice(1).map((t, i) => t - (attempts[i] ?? t));
      // Delays 10, 20, 40, 40 ms (timers may fire a millisecond early).
      [10, 20, 40, 40].forEach((delay, i) => expect(gaps[i]).toBeGreaterThanOrEqual(delay - 2));
    }));

  it('hands each new batch to the handler asynchronously, after send returns', () =>
    withBus({}, async (bus) => {
      const topic = await topicOf(bus, 'async');
      const events: string[] = [];
      await bus.consumer({ groupId: uniqueName('async'), topics: [topic] }).run(async () => {
        events.push('handled');
      });
      await bus.producer().send(topic, [recordOf(10)]);
      events.push('send returned');
      await waitFor(() => events.length === 2, 'the record');
      expect(events).toEqual(['send returned', 'handled']);
    }));

  it('stops every consumer when the bus closes, and rejects sends that were waiting', () =>
    withBus({ maxBytes: 100 }, async (bus) => {
      const topic = await topicOf(bus, 'shutdown');
      const consumer = bus.consumer({ groupId: uniqueName('shutdown'), topics: [topic] });
      const { handled, running } = collect(consumer);
      await running;
      consumer.pause([topic]);
      const producer = bus.producer();
      await producer.send(topic, [recordOf(100)]);
      const waiting = producer.send(topic, [recordOf(100)]);

      await bus.close();
      await expect(waiting).rejects.toMatchObject({ code: ErrorCode.BusClosed });
      expect(consumer.assignment()).toEqual([]);
      expect(handled).toEqual([]);
      expect(bus.status().state).toBe('closed');
      expect(() => bus.producer()).toThrow(expect.objectContaining({ code: ErrorCode.BusClosed }));
      await expect(bus.createTopics([{ name: uniqueName('late'), partitions: 1 }])).rejects.toMatchObject({ code: ErrorCode.BusClosed });
    }));
});

describe('memory bus: arguments', () => {
  it('rejects unknown topics with BusUnknownTopic', () =>
    withBus({}, async (bus) => {
      const unknown = uniqueName('missing');
      const unknownTopic = { code: ErrorCode.BusUnknownTopic };
      await expect(bus.producer().send(unknown, [recordOf(5)])).rejects.toMatchObject(unknownTopic);
      await expect(bus.consumer({ groupId: uniqueName('g'), topics: [unknown] }).run(async () => {})).rejects.toMatchObject(unknownTopic);
      await expect(bus.committed(uniqueName('g'), unknown)).rejects.toMatchObject(unknownTopic);
    }));

  it('rejects bad topic specs, records, options and calls with BusInvalidArgument', () =>
    withBus({}, async (bus) => {
      const invalid = { code: ErrorCode.BusInvalidArgument };
      await expect(bus.createTopics([{ name: 'has space', partitions: 1 }])).rejects.toMatchObject(invalid);
      await expect(bus.createTopics([{ name: uniqueName('zero'), partitions: 0 }])).rejects.toMatchObject(invalid);
      const topic = await topicOf(bus, 'args', 2);
      await expect(bus.createTopics([{ name: topic, partitions: 3 }])).rejects.toMatchObject(invalid);
      await bus.createTopics([{ name: topic, partitions: 2 }]); // the same spec again is fine

      const bad = [{ key: 'k', value: 'not bytes' }] as unknown as [];
      await expect(bus.producer().send(topic, bad)).rejects.toMatchObject(invalid);
      expect(() => bus.consumer({ groupId: '', topics: [topic] })).toThrow(expect.objectContaining(invalid));
      expect(() => bus.consumer({ groupId: 'g', topics: [topic], maxBatchSize: 0 })).toThrow(expect.objectContaining(invalid));
      expect(() => createMemoryBus({ maxBytes: -1 })).toThrow(expect.objectContaining(invalid));

      const consumer = bus.consumer({ groupId: uniqueName('args'), topics: [topic] });
      await expect(consumer.commit([{ topic, partition: 0, offset: 0 }])).rejects.toMatchObject(invalid);
      expect(() => consumer.pause([uniqueName('other')])).toThrow(expect.objectContaining(invalid));
      await consumer.run(async () => {});
      await expect(consumer.run(async () => {})).rejects.toMatchObject(invalid);
      await expect(consumer.commit([{ topic, partition: 0, offset: 5 }])).rejects.toMatchObject(invalid);
      await consumer.close();

      // A rewind below records every group has consumed (and the bus has released) is refused.
      const released = await topicOf(bus, 'released');
      const reader = bus.consumer({ groupId: uniqueName('released'), topics: [released] });
      const { handled, running } = collect(reader);
      await running;
      await bus.producer().send(released, [recordOf(5), recordOf(5)]);
      await waitFor(() => partitionStatus(bus, released)?.startOffset === 2, 'the records to be released');
      expect(handled).toHaveLength(2);
      await expect(reader.commit([{ topic: released, partition: 0, offset: 1 }])).rejects.toMatchObject(invalid);
    }));

  it('refuses to join a group whose assigner leaves partitions unassigned', () =>
    withBus({}, async (bus) => {
      const topic = await topicOf(bus, 'broken-assigner', 2);
      const lazy = { name: 'lazy', assign: () => new Map() };
      const consumer = bus.consumer({ groupId: uniqueName('broken'), topics: [topic], assigner: lazy });
      await expect(consumer.run(async () => {})).rejects.toMatchObject({ code: ErrorCode.BusInvalidArgument });
      expect(bus.status().groups.flatMap((g) => g.members)).toEqual([]);
    }));
});

describe('partitioning', () => {
  it("hashes keys with Kafka's murmur2", () => {
    // Test vectors from Kafka's UtilsTest.testMurmur2.
    const vectors: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [key, hash] of vectors) expect(murmur2(encoder.encode(key))).toBe(hash);
    expect(partitionForKey('foobar', 7)).toBe((-790332482 & 0x7fffffff) % 7);
  });

  it('round-robin deals partitions out the same way whatever the input order', () => {
    const members = [{ memberId: 'b', metadata: {} }, { memberId: 'a', metadata: {} }];
    const partitions = [1, 0, 2].map((partition) => ({ topic: 't', partition }));
    const assignment = roundRobinAssigner.assign({ members, partitions });
    expect(assignment).toEqual(
      new Map([
        ['a', [{ topic: 't', partition: 0 }, { topic: 't', partition: 2 }]],
        ['b', [{ topic: 't', partition: 1 }]],
      ]),
    );
    expect(roundRobinAssigner.assign({ members: [...members].reverse(), partitions: [...partitions].reverse() })).toEqual(assignment);
  });
});
