/**
 * Records Kafka lost (see `kafka/loss-watch.ts`) become drops: one per lost frame, per frame whose
 * crops (tasks) were lost, and per frame whose result rows were lost, with the loss's reason
 * (`broker-replaced`, `topic-deleted`, `log-truncated`) and what was seen. A lost drop is
 * published again as it was (it is a drop already; its row id makes a second copy harmless).
 *
 * "Lost" is "produced and not seen committed by its consumer when the loss was noticed": the
 * last second's consumption may not have been seen, so a frame can have its rows and a drop
 * that says they may have been lost; never a frame with neither.
 */
import { isFramesTopic, taskTopicModel, Channels, Topics, type Drop } from '../contracts/index.js';
import type { Logger } from '../logger.js';
import type { BusLoss, LossWatchOptions } from './kafka/index.js';
import type { Bus, ProducerRecord } from './types.js';

/** What is remembered of a produced record: enough for its drop, not its image. */
export interface LossNote {
  what: Drop['what'];
  source: string;
  frameSeq?: number;
  /** The table of a lost row. */
  table?: string;
  /** A drop record itself, to publish again. */
  drop?: ProducerRecord;
}

/** Notes for the topics whose loss loses a frame's results: frames, tasks, rows and drops. */
export function lossNote(topic: string, record: ProducerRecord): LossNote | undefined {
  try {
    if (isFramesTopic(topic)) {
      const { source, seq } = Channels.frames.decode(record.value);
      return { what: 'frame', source, frameSeq: seq };
    }
    const model = taskTopicModel(topic);
    if (model !== undefined) {
      const { source, frameSeq } = Channels.tasks(model).decode(record.value);
      return { what: 'task', source, frameSeq };
    }
    if (topic === Topics.results) {
      const row = Channels.results.decode(record.value);
      const seq = row.fields.frame_seq;
      return { what: 'row', source: row.source, table: row.table, ...(typeof seq === 'number' && seq >= 0 ? { frameSeq: seq } : {}) };
    }
    if (topic === Topics.drops) return { what: 'message', source: record.key, drop: record };
  } catch {
    // Not ours to judge here: its consumer sends an undecodable record to the dead letters.
  }
  return undefined;
}

/** The drops of a loss, one per (what, source, frame), plus the lost drops themselves. */
export function lossDrops(loss: BusLoss<LossNote>, where: string, atMs = Date.now()): { drops: ProducerRecord[]; resent: ProducerRecord[] } {
  const resent: ProducerRecord[] = [];
  const grouped = new Map<string, { note: LossNote; tables: Set<string>; topics: Set<string>; count: number }>();
  for (const { topic, note } of loss.records) {
    if (note.drop) {
      resent.push(note.drop);
      continue;
    }
    const key = `${note.what}\u0000${note.source}\u0000${note.frameSeq ?? ''}`;
    const entry = grouped.get(key) ?? { note, tables: new Set<string>(), topics: new Set<string>(), count: 0 };
    entry.count += 1;
    entry.topics.add(topic);
    if (note.table) entry.tables.add(note.table);
    grouped.set(key, entry);
  }
  const drops = [...grouped.values()].map(({ note, tables, topics, count }) => {
    const what = note.what === 'row' ? `${count} result row${count === 1 ? '' : 's'}${tables.size > 0 ? ` (${[...tables].sort().join(', ')})` : ''}` : `the ${note.what}`;
    const drop: Drop = {
      what: note.what,
      where,
      why: loss.reason,
      source: note.source,
      atMs,
      detail: `${what} on ${[...topics].sort().join(', ')} may be lost: ${loss.detail}; produced, and not seen consumed before that`,
      ...(note.frameSeq !== undefined ? { frameSeq: note.frameSeq } : {}),
    };
    return Channels.drops.record(drop);
  });
  if (loss.unrecorded > 0) {
    const drop: Drop = { what: 'message', where, why: loss.reason, atMs, detail: `${loss.unrecorded} more records on ${loss.topics.join(', ')} were lost that this process had no room to remember one by one: ${loss.detail}` };
    drops.push(Channels.drops.record(drop));
  }
  return { drops, resent };
}

/**
 * The loss watch of a process's Kafka bus: notes as above, each topic's consuming group from
 * `consumerOf`, and drops published on `panoptes.drops` by `where` (e.g. `bus:backend`).
 * `bus` is read when a loss is reported, so the watch can be made before the bus it watches.
 */
export function dropsOnLoss(options: { bus: () => Bus; consumerOf: (topic: string) => string | undefined; where: string; logger: Logger }): LossWatchOptions<LossNote> {
  return {
    note: lossNote,
    consumerOf: options.consumerOf,
    async onLost(loss) {
      const { drops, resent } = lossDrops(loss, options.where);
      if (drops.length + resent.length === 0) return;
      // A failure reaches the bus, which keeps the loss and tries again next round.
      const producer = options.bus().producer();
      try {
        await producer.send(Topics.drops, [...drops, ...resent]);
        options.logger.warn({ drops: drops.length, resent: resent.length, reason: loss.reason }, 'drops recorded for the records Kafka lost');
      } finally {
        await producer.close();
      }
    },
  };
}
