/**
 * The Kafka bus against a real broker (the one test/servers-setup.ts started): the shared Bus
 * conformance suite.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createKafkaBus, type PartitionAssigner } from '../../core/bus/index.js';
import { ErrorCode } from '../../core/errors.js';
import { silentLogger } from '../../core/logger.js';
import { serverAddress, serverSkipReason } from '../servers.js';
import { describeBusConformance, uniqueName } from './bus.suite.js';

describe.skipIf(serverSkipReason('kafka') !== undefined)('kafka', () => {
  describeBusConformance('kafka', async () => createKafkaBus({ brokers: [serverAddress('kafka') ?? ''], logger: silentLogger() }));

  it('reports a consumer that kafkajs cannot restart, instead of hanging', async () => {
    const fatal: string[] = [];
    const bus = await createKafkaBus({ brokers: [serverAddress('kafka') ?? ''], logger: silentLogger(), onFatal: (_err, groupId) => fatal.push(groupId) });
    try {
      const topic = uniqueName('fatal');
      await bus.createTopics([{ name: topic, partitions: 1 }]);
      const broken: PartitionAssigner = {
        name: 'broken',
        assign: () => {
          throw new Error('this assigner always fails');
        },
      };
      const groupId = uniqueName('fatal');
      await expect(bus.consumer({ groupId, topics: [topic], assigner: broken }).run(async () => {})).rejects.toThrow('this assigner always fails');
      expect(fatal).toEqual([groupId]);
    } finally {
      await bus.close();
    }
  });
});

describe('kafka bus without a broker', () => {
  it('fails with PANOPTES_BUS_UNAVAILABLE naming the address it tried', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve)); // a port nobody listens on
    const brokers = [`127.0.0.1:${port}`];
    const failure = createKafkaBus({ brokers, logger: silentLogger(), connectionRetryMs: 1_000 });
    await expect(failure).rejects.toMatchObject({ code: ErrorCode.BusUnavailable, retriable: true });
    await expect(failure).rejects.toThrow(`cannot reach Kafka at 127.0.0.1:${port}`);
  });
});
