/**
 * The Kafka bus against a real broker: the shared Bus conformance suite, then what only the
 * Kafka adapter does.
 */
import { describe } from 'vitest';
import { createKafkaBus } from '../../core/bus/index.js';
import { silentLogger } from '../../core/logger.js';
import { describeBusConformance } from './bus.suite.js';

const brokers = process.env.PANOPTES_KAFKA_BROKERS;

describe.skipIf(!brokers)('kafka', () => {
  describeBusConformance('kafka', async () => createKafkaBus({ brokers: [brokers ?? ''], logger: silentLogger() }));
});
