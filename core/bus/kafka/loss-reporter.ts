/**
 * Runs the loss ledger (`loss-watch.ts`) once a second and acts on what it finds: a new
 * cluster's producer ids for the producers, the lost topics created again, one error line, this
 * process's consumers sent back to the start of the topics made anew (records produced there
 * before they noticed would otherwise be skipped), and the loss handed to the process's `onLost`
 * (which records drops). A loss whose topics cannot be created yet, or whose drops cannot be
 * published yet (the broker still starting), is kept and tried again each round, never forgotten.
 * Stopping runs one last round, so a process that finishes right after the broker came back
 * empty (an ingest worker at the end of its file) still reports what it had produced there; a
 * loss still unreported when the bus closes is said in an error line, the last record left.
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
  /** Makes this process's consumers read the given topics, made anew, from their start. */
  rewind: (topics: readonly string[]) => Promise<void>;
  logger: Logger;
}

export interface LossReporter {
  /** Stops the rounds after a last one: within `withinMs`, or as soon as `giveUp` resolves. */
  stop(withinMs: number, giveUp?: Promise<void>): Promise<void>;
}

const FAILURE_LOG_MS = 30_000;

export function startLossReporter<N>(options: LossReporterOptions<N>): LossReporter {
  const { ledger, watch, topics, logger } = options;
  const failures = createLogThrottle(FAILURE_LOG_MS);
  const unreported: BusLoss<N>[] = [];
  /** Losses whose topics the consumers read again from the start: once, even if the report is retried. */
  const rewound = new WeakSet<BusLoss<N>>();
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
      const loss = unreported[0]!;
      // A truncated log keeps its offsets below the cut: consumers read on from where they were.
      if (loss.reason !== 'log-truncated' && !rewound.has(loss)) {
        await options.rewind(loss.topics);
        rewound.add(loss);
      }
      await watch.onLost(loss);
      unreported.shift();
    }
  }

  const roundLogged = (): Promise<void> =>
    round().catch((err: unknown) =>
      failures.log('round', (repeats) => logger.warn({ err, unreported: unreported.length }, `Kafka loss check or report failed; trying again each second${repeatedSuffix(repeats, FAILURE_LOG_MS)}`)),
    );

  const timer = setInterval(() => {
    running ??= roundLogged().finally(() => (running = undefined));
  }, watch.intervalMs ?? 1_000).unref();

  return {
    async stop(withinMs, giveUp) {
      clearInterval(timer);
      const last = (async () => {
        await running;
        await roundLogged();
      })();
      let timeout: NodeJS.Timeout | undefined;
      await Promise.race([last, new Promise((resolve) => (timeout = setTimeout(resolve, withinMs))), ...(giveUp ? [giveUp] : [])]);
      clearTimeout(timeout);
      failures.close();
      for (const loss of unreported) {
        logger.error({ reason: loss.reason, lost: count(loss), topics: loss.topics }, `${count(loss)} records Kafka lost (${loss.detail}) could not be recorded as drops before this process stopped`);
      }
    },
  };
}
