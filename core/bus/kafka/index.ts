/**
 * The Bus port on Apache Kafka (kafkajs). Reading order: `bus.ts` (topics, producing, offsets),
 * `consumer.ts` (group member and delivery rules), `assigner.ts` (our assigners in kafkajs's
 * group protocol).
 */
export { createKafkaBus } from './bus.js';
export type { KafkaBus, KafkaBusOptions } from './bus.js';
