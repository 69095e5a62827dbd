import { describe, expect, it, vi } from 'vitest';
import { waitUntilConsumed } from '../../cli/index.js';
import { createMemoryBus, ErrorCode, PanoptesError, type Bus } from '../../core/index.js';

/** A memory bus whose `committed` (or `endOffsets`) fails the first `failures` times with `error`. */
function failingAtFirst(bus: Bus, failures: number, error: () => Error, call: 'committed' | 'endOffsets' = 'committed'): Bus {
  let left = failures;
  const calls = {
    committed: (groupId: string, topic: string) => (left-- > 0 ? Promise.reject(error()) : bus.committed(groupId, topic)),
    endOffsets: (topic: string) => (left-- > 0 ? Promise.reject(error()) : bus.endOffsets(topic)),
  };
  return Object.assign(Object.create(bus) as Bus, { [call]: calls[call] });
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
    // Reading the end offsets first (upToNow), likewise.
    await waitUntilConsumed(failingAtFirst(bus, 2, notHosted, 'endOffsets'), 'g', ['frames'], undefined, { upToNow: true });
    await bus.close();
  });

  it('fails on an error that is not retriable', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([{ name: 'frames', partitions: 1 }]);
    const closed = (): Error => new PanoptesError(ErrorCode.BusClosed, 'the bus is closed');
    await expect(waitUntilConsumed(failingAtFirst(bus, 1, closed), 'g', ['frames'])).rejects.toThrow('the bus is closed');
    await bus.close();
  });

  it('upToNow: returns once the group has what was produced before the call, on a topic that never falls silent', async () => {
    const bus = createMemoryBus();
    await bus.createTopics([{ name: 'stats', partitions: 1 }]);
    const producer = bus.producer();
    await producer.send('stats', [{ key: 'b', value: new Uint8Array([1]) }]);
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const handled: number[] = [];
    // The group takes offset 0 and then stalls on anything later.
    await bus.consumer({ groupId: 'g', topics: ['stats'] }).run(async (batch) => {
      for (const m of batch.messages) {
        if (m.offset > 0) await held;
        handled.push(m.offset);
      }
    });
    await vi.waitFor(async () => expect((await bus.committed('g', 'stats'))[0]?.offset).toBe(1));
    const waiting = waitUntilConsumed(bus, 'g', ['stats'], undefined, { upToNow: true });
    await producer.send('stats', [{ key: 'b', value: new Uint8Array([2]) }]);
    await waiting;
    let stillWaiting = true;
    const chasing = waitUntilConsumed(bus, 'g', ['stats'], () => !stillWaiting).then(() => stillWaiting);
    await new Promise((r) => setTimeout(r, 200));
    stillWaiting = false;
    // Without upToNow the wait is still behind the message the group holds.
    expect(await chasing).toBe(false);
    release();
    await bus.close();
    expect(handled).toEqual([0, 1]);
  });
});
