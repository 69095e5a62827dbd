import { randomUUID } from 'node:crypto';
import { Channels, createLogThrottle, describeError, repeatedSuffix, Topics, type Batch, type Bus, type Consumer, type Logger, type Plan } from '../../core/index.js';

export interface PlanFollowerOptions {
  id: string;
  bus: Bus;
  groupId: string;
  /** Puts a plan in force; called with one plan at a time, each newer than the last. */
  follow(plan: Plan): Promise<void>;
  logger: Logger;
}

/**
 * How far ahead of this backend's clock a plan's `createdAtMs` may be. Plans are ordered by it, so
 * one stamped far ahead (a clock gone wrong, or a message forged on the topic) would outrank every
 * plan after it; it is skipped instead.
 */
const MAX_CLOCK_AHEAD_MS = 60_000;

export interface PlanFollower {
  start(): Promise<void>;
  /** Takes no more plans; resolves once the one being followed is in force. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Reads the scheduler's plans and follows the newest, one at a time. Its consumer group is its
 * own and new at each start: every backend reads every plan kept on the topic, and at start
 * follows only the newest of them. A plan that cannot be decoded or followed is said and
 * skipped: the scheduler publishes another every epoch.
 */
export function createPlanFollower(options: PlanFollowerOptions): PlanFollower {
  let reader: Consumer | undefined;
  let following = Promise.resolve();
  let newestFollowed: Plan | undefined;
  const skips = createLogThrottle();

  const onPlans = async (batch: Batch): Promise<void> => {
    let newest: Plan | undefined;
    for (const message of batch.messages) {
      try {
        const next = Channels.plan.decode(message.value);
        const ahead = next.createdAtMs - Date.now();
        if (ahead > MAX_CLOCK_AHEAD_MS) {
          skips.log('ahead', (repeats) =>
            options.logger.warn({ offset: message.offset, epoch: next.epoch, aheadMs: ahead }, `plan stamped more than a minute ahead of this clock skipped (are the scheduler's and this backend's clocks in sync?)${repeatedSuffix(repeats, 30_000)}`),
          );
          continue;
        }
        if (!newest || next.createdAtMs > newest.createdAtMs) newest = next;
      } catch (err) {
        skips.log('undecodable', (repeats) => options.logger.warn({ offset: message.offset, err: describeError(err) }, `undecodable plan skipped${repeatedSuffix(repeats, 30_000)}`));
      }
    }
    if (!newest) return;
    const next = newest;
    following = following
      .then(async () => {
        if (newestFollowed && next.createdAtMs <= newestFollowed.createdAtMs) return;
        newestFollowed = next;
        await options.follow(next);
      })
      .catch((err: unknown) => options.logger.error({ err, epoch: next.epoch }, 'plan not followed'));
    await following;
  };

  return {
    async start() {
      reader = options.bus.consumer({ groupId: `${options.groupId}.plan.${options.id}.${randomUUID()}`, topics: [Topics.plan] });
      await reader.run(onPlans);
    },
    async stop() {
      reader?.pause([Topics.plan]);
      await following;
    },
    async close() {
      await reader?.close();
      await following;
      skips.close();
    },
  };
}
