import { describe, expect, it } from 'vitest';
import { waitUntilConsumed } from '../../cli/index.js';
import { createMemoryBus, ErrorCode, PanoptesError, type Bus } from '../../core/index.js';

/** A memory bus whose `committed` fails the first `failures` times with `error`. */
function failingAtFirst(bus: Bus, failures: number, error: () => Error): Bus {
  let left = failures;
  return Object.assign(Object.create(bus) as Bus, {
    committed: (groupId: string, topic: string) => (left-- > 0 ? Promise.reject(error()) : bus.committed(groupId, topic)),
  });
}

describe('waitUntilConsumed', () => {
  it('asks again after an error the client marks retriable, and returns once the group is at the end', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([{ name: 'frames', partitions: 1 }]);
    const producer = bus.producer();
    await producer.send('frames', [{ key: 'cam', value: new Uint8Array([1]) }]);
    const handled: number[] = [];
    await bus.consumer({ groupId: 'g', topics: ['frames'] }).run(async (batch) => void handled.push(...batch.messages.map((m) => m.offset)));
    // kafkajs' "This server does not host this topic-partition" while a replaced broker re-creates topics.
    const notHosted = (): Error => Object.assign(new Error('This server does not host this topic-partition'), { retriable: true });
    await waitUntilConsumed(failingAtFirst(bus, 2, notHosted), 'g', ['frames']);
    expect(handled).toEqual([0]);
    await bus.close();
  });

  it('fails on an error that is not retriable', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([{ name: 'frames', partitions: 1 }]);
    const closed = (): Error => new PanoptesError(ErrorCode.BusClosed, 'the bus is closed');
    await expect(waitUntilConsumed(failingAtFirst(bus, 1, closed), 'g', ['frames'])).rejects.toThrow('the bus is closed');
    await bus.close();
  });
});
