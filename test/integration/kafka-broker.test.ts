import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kafkaUnavailableReason, startKafkaBroker, type KafkaBroker } from '../../tools/kafka/broker.js';
import { canConnect, processAlive } from '../../tools/processes.js';

const unavailable = kafkaUnavailableReason();
if (unavailable) console.warn(`Kafka broker test skipped: ${unavailable}`);

describe.skipIf(unavailable)('Kafka broker for tests', () => {
  it('starts, stops, and restarts on the same data without formatting it again', async () => {
    let broker: KafkaBroker = await startKafkaBroker({ heapMb: 256 });
    const { dataDir, port, controllerPort } = broker;
    const meta = join(dataDir, 'logs/meta.properties');
    try {
      const formatted = await readFile(meta, 'utf8');
      expect(await canConnect(port)).toBe(true);
      await broker.stop();
      expect(processAlive(broker.pid)).toBe(false);

      broker = await startKafkaBroker({ dataDir, port, controllerPort, heapMb: 256 });
      expect(broker.brokers).toBe(`127.0.0.1:${port}`);
      expect(await canConnect(port)).toBe(true);
      expect(await readFile(meta, 'utf8')).toBe(formatted); // same cluster id: not formatted again
      await broker.stop();
      expect(await canConnect(port)).toBe(false);
    } finally {
      await broker.kill();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
