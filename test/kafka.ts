/** The Kafka broker that test/kafka-setup.ts started (or was given), for `describe.skipIf`. */
import { inject } from 'vitest';
import type { KafkaContext } from './kafka-setup.js';

let warned = false;

function kafka(): KafkaContext {
  // Undefined when a config without the global setup runs the test.
  return (inject('kafka') as KafkaContext | undefined) ?? { skipReason: 'no Kafka global setup (test/kafka-setup.ts) in this vitest config' };
}

/** "host:port" of the broker, or undefined when Kafka tests skip. */
export function kafkaBrokers(): string | undefined {
  const k = kafka();
  return 'brokers' in k ? k.brokers : undefined;
}

/** Why Kafka tests skip (warned once per test file), or undefined when a broker is there. */
export function kafkaSkipReason(): string | undefined {
  const k = kafka();
  if ('brokers' in k) return undefined;
  if (!warned) console.warn(`Kafka tests skipped: ${k.skipReason}`);
  warned = true;
  return k.skipReason;
}
