export type * from './types.js';
export { roundRobinAssigner, routingAssigner, type RoutingWeights } from './assigners.js';
export { createMemoryBus } from './memory/index.js';
export type { MemoryBus, MemoryBusOptions, MemoryBusStatus } from './memory/index.js';
export { createKafkaBus } from './kafka/index.js';
export type { KafkaBus, KafkaBusOptions } from './kafka/index.js';
export { deadLetter, DeadLetterHeaders } from './dead-letter.js';
