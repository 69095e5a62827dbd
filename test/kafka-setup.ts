// vitest globalSetup: one Kafka broker for the whole run, handed to tests as inject('kafka').
// PANOPTES_KAFKA_BROKERS names a broker started elsewhere (CI starts one with `npm run kafka`);
// PANOPTES_KAFKA_REQUIRED=1 turns "no broker" from skipped tests into a failed run.
import { rm } from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import { kafkaUnavailableReason, startKafkaBroker } from '../tools/kafka/broker.js';

export type KafkaContext = { brokers: string } | { skipReason: string };

declare module 'vitest' {
  export interface ProvidedContext {
    kafka: KafkaContext;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env.PANOPTES_KAFKA_BROKERS;
  if (given) {
    project.provide('kafka', { brokers: given });
    return undefined;
  }
  const required = process.env.PANOPTES_KAFKA_REQUIRED === '1';
  const reason = kafkaUnavailableReason();
  if (reason) {
    if (required) throw new Error(`PANOPTES_KAFKA_REQUIRED=1 but no Kafka broker can be started: ${reason}`);
    project.provide('kafka', { skipReason: reason });
    return undefined;
  }
  try {
    const broker = await startKafkaBroker({ log: (line) => console.log(line) });
    project.provide('kafka', { brokers: broker.brokers });
    return async () => {
      await broker.stop();
      await rm(broker.dataDir, { recursive: true, force: true });
    };
  } catch (err) {
    if (required) throw err;
    project.provide('kafka', { skipReason: `the Kafka broker did not start: ${(err as Error).message}` });
    return undefined;
  }
}
