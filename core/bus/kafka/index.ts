/**
 * The Bus port on Apache Kafka (kafkajs). Reading order: `bus.ts` (the adapter, its bounded
 * close), `producer.ts` (coalesced sends), `consumer.ts` (group member and delivery rules),
 * `topics.ts` (creating and re-creating topics), `loss-watch.ts` (records a broker lost) and
 * `loss-reporter.ts` (acting on it),
 * `kafka-log.ts` (kafkajs's log lines, bounded), `assigner.ts` (our assigners in kafkajs's
 * group protocol).
 */
export { createKafkaBus } from './bus.js';
export type { KafkaBus, KafkaBusOptions } from './bus.js';
export type { BusLoss, LossReason, LossWatchOptions } from './loss-watch.js';
