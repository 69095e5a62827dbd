/**
 * The Kafka bus against a real broker (the one test/kafka-setup.ts started): the shared Bus
 * conformance suite.
 */
import { describe } from 'vitest';
import { createKafkaBus } from '../../core/bus/index.js';
import { silentLogger } from '../../core/logger.js';
import { kafkaBrokers, kafkaSkipReason } from '../kafka.js';
import { describeBusConformance } from './bus.suite.js';

describe.skipIf(kafkaSkipReason() !== undefined)('kafka', () => {
  describeBusConformance('kafka', async () => createKafkaBus({ brokers: [kafkaBrokers() ?? ''], logger: silentLogger() }));
});
