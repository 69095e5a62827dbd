/**
 * kafkajs's log lines in ours. kafkajs logs every failed request at ERROR, also those it retries
 * (a coordinator still loading, a broker restarting). What finally fails reaches the caller as a
 * thrown error, so its logs are diagnostics one level down.
 *
 * While a broker is away or has lost its topics, kafkajs repeats the same line several times a
 * second ("This server does not host this topic-partition", "Restarting the consumer"): each kind
 * is logged once, then summarized with its count every `intervalMs` (see `../log-throttle.ts`).
 */
import { logLevel, type LogEntry } from 'kafkajs';
import type { Logger } from '../../logger.js';
import { createLogThrottle, repeatedSuffix, type LogThrottle } from '../log-throttle.js';

const LEVELS: Record<number, 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'warn',
  [logLevel.WARN]: 'info',
  [logLevel.INFO]: 'debug',
  [logLevel.DEBUG]: 'debug',
};

/** Errors kafkajs retries by itself while a broker starts or a group settles. */
const TRANSIENT = /coordinator is (loading|not available)|not the correct coordinator|leader not available|no leader|rebalanc/i;

export interface KafkaLog {
  write(entry: LogEntry): void;
  close(): void;
}

export function createKafkaLog(logger: Logger, intervalMs = 30_000): KafkaLog {
  const throttle: LogThrottle = createLogThrottle(intervalMs);
  return {
    write({ level, log }) {
      const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
      const error = String(fields.error ?? '');
      const at = TRANSIENT.test(error) ? 'debug' : (LEVELS[level] ?? 'debug');
      if (!logger.isLevelEnabled(at)) return;
      // Numbers (retry counts, delays, correlation ids, ports) vary between repeats of one kind.
      const kind = `${message} ${error}`.replace(/\d+/g, '#');
      throttle.log(kind, (repeats) => logger[at]({ kafka: fields }, `kafka: ${message}${repeatedSuffix(repeats, intervalMs)}`));
    },
    close: () => throttle.close(),
  };
}
