/**
 * Runs the loss ledger (`loss-watch.ts`) once a second and acts on what it finds: a new
 * cluster's producer ids for the producers, the lost topics created again, one error line, and
 * the loss handed to the process's `onLost` (which records drops). A loss whose topics cannot be
 * created yet, or whose drops cannot be published yet (the broker still starting), is kept and
 * tried again each round, never forgotten; one still unreported when the bus closes is said in
 * an error line, the last record left.
 */
import type { Logger } from '../../logger.js';
import { createLogThrottle, repeatedSuffix } from '../log-throttle.js';
import type { BusLoss, LossLedger, LossWatchOptions } from './loss-watch.js';
import type { CoalescingProducer } from './producer.js';
import type { TopicAdmin } from './topics.js';

export interface LossReporterOptions<N> {
  ledger: LossLedger<N>;
  watch: LossWatchOptions<N>;
  topics: TopicAdmin;
  producers: () => Iterable<CoalescingProducer>;
  logger: Logger;
}

export interface LossReporter {
  /** Stops the rounds; waits a moment for the one running. */
  stop(): Promise<void>;
}

const FAILURE_LOG_MS = 30_000;

export function startLossReporter<N>(options: LossReporterOptions<N>): LossReporter {
  const { ledger, watch, topics, logger } = options;
  const failures = createLogThrottle(FAILURE_LOG_MS);
  const unreported: BusLoss<N>[] = [];
  let running: Promise<void> | undefined;

  const count = (loss: BusLoss<N>): number => loss.records.length + loss.unrecorded;

  async function round(): Promise<void> {
    const loss = await ledger.check(topics.known());
    if (loss) {
      // Producer ids of the old cluster mean nothing to the new one (see producer.ts).
      if (loss.reason === 'broker-replaced') for (const p of options.producers()) p.renew();
      logger.error(
        { reason: loss.reason, lost: count(loss), topics: loss.topics },
        `Kafka lost records: ${loss.detail}; re-creating the topics; ${count(loss)} records this process produced and nobody had consumed are recorded as drops (reason ${loss.reason})`,
      );
      unreported.push(loss);
    }
    while (unreported.length > 0) {
      const recreated = await topics.recreate();
      if (recreated.length > 0) logger.warn({ recreated }, `re-created ${recreated.join(', ')}`);
      await watch.onLost(unreported[0]!);
      unreported.shift();
    }
  }

  const timer = setInterval(() => {
    running ??= round()
      .catch((err: unknown) =>
        failures.log('round', (repeats) => logger.warn({ err, unreported: unreported.length }, `Kafka loss check or report failed; trying again each second${repeatedSuffix(repeats, FAILURE_LOG_MS)}`)),
      )
      .finally(() => (running = undefined));
  }, watch.intervalMs ?? 1_000).unref();

  return {
    async stop() {
      clearInterval(timer);
      await Promise.race([running, new Promise((resolve) => setTimeout(resolve, 500).unref())]);
      failures.close();
      for (const loss of unreported) {
        logger.error({ reason: loss.reason, lost: count(loss), topics: loss.topics }, `${count(loss)} records Kafka lost (${loss.detail}) could not be recorded as drops before this process stopped`);
      }
    },
  };
}
