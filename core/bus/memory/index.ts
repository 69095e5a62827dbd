/**
 * The in-process bus with Kafka's semantics: the embedded default (DESIGN.md §2).
 *
 * Reading order: `bus.ts` (the port, memory budget and retention rules), `consumer.ts` (group
 * member and delivery loop), `group.ts` (assignment, batch claims, committed offsets),
 * `topic.ts` + `partition-log.ts` (storage), `partitioner.ts` (Kafka's murmur2 key hashing),
 * `send-queue.ts` (producers waiting for room).
 */
export { createMemoryBus } from './bus.js';
export type { MemoryBus, MemoryBusOptions, MemoryBusStatus } from './bus.js';
