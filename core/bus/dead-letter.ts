/**
 * Dead letters: a message a stage cannot decode is republished, bytes untouched, to the
 * dead-letter topic with why and where it failed, and the stage goes on with the next message.
 * Retrying it would fail the same way and hold up its partition forever; dropping it would lose
 * data an operator may want to inspect or replay once the bug is fixed.
 */
import type { BusMessage, ProducerRecord } from './types.js';

export const DeadLetterHeaders = {
  reason: 'panoptes-dead-reason',
  stage: 'panoptes-dead-stage',
  topic: 'panoptes-dead-topic',
  partition: 'panoptes-dead-partition',
  offset: 'panoptes-dead-offset',
} as const;

/** The record to send to the dead-letter topic for `message`, which `stage` could not handle. */
export function deadLetter(message: BusMessage, stage: string, reason: string): ProducerRecord {
  return {
    key: message.key,
    value: message.value,
    headers: {
      ...message.headers,
      [DeadLetterHeaders.reason]: reason,
      [DeadLetterHeaders.stage]: stage,
      [DeadLetterHeaders.topic]: message.topic,
      [DeadLetterHeaders.partition]: String(message.partition),
      [DeadLetterHeaders.offset]: String(message.offset),
    },
  };
}
