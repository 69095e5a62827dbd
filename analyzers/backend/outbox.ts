import {
  Channels,
  deadLetter,
  describeError,
  Topics,
  type BusMessage,
  type Drop,
  type Logger,
  type Producer,
  type ProducerRecord,
  type ResultRow,
  type Task,
} from '../../core/index.js';
import type { DagOutbox } from '../dag/index.js';

/** What a backend has published, for its status. */
export interface OutboxTally {
  rows: number;
  /** Rows published per table. */
  rowsByTable: Record<string, number>;
  drops: number;
  /** Drops by reason (`deadline`, `decode`, ...). */
  dropsByReason: Record<string, number>;
}

export const emptyTally = (): OutboxTally => ({ rows: 0, rowsByTable: {}, drops: 0, dropsByReason: {} });

/**
 * What handling one batch of messages publishes, by topic, sent once the whole batch is handled:
 * the batch's messages are committed only after their rows, drops and child tasks are sent.
 */
export class Outbox implements DagOutbox {
  private readonly records = new Map<string, ProducerRecord[]>();

  constructor(
    private readonly where: string,
    private readonly tally: OutboxTally,
    private readonly logger: Logger,
  ) {}

  row(row: ResultRow): void {
    this.tally.rowsByTable[row.table] = (this.tally.rowsByTable[row.table] ?? 0) + 1;
    this.post(Channels.results.topic, Channels.results.record(row));
  }

  task(model: string, task: Task, delayTolerant: boolean): void {
    const tasks = Channels.tasks(model, delayTolerant);
    this.post(tasks.topic, tasks.record(task));
  }

  drop(what: Drop['what'], why: string, detail: string, at: { source?: string; seq?: number }): void {
    this.tally.drops += 1;
    this.tally.dropsByReason[why] = (this.tally.dropsByReason[why] ?? 0) + 1;
    // Deadline drops are how a loaded backend keeps up: counted and stored, not shouted.
    this.logger[why === 'deadline' ? 'debug' : 'warn']({ source: at.source, seq: at.seq, why, detail }, `${what} dropped`);
    const message: Drop = { what, where: this.where, why, detail, atMs: Date.now() };
    if (at.source !== undefined) message.source = at.source;
    if (at.seq !== undefined) message.frameSeq = at.seq;
    this.post(Channels.drops.topic, Channels.drops.record(message));
  }

  /** An undecodable message: its bytes to the dead-letter topic, a drop for the drops table. */
  undecodable(message: BusMessage, err: unknown): void {
    this.post(Topics.dead, deadLetter(message, this.where, describeError(err)));
    this.drop('message', 'decode', describeError(err), { source: message.key });
  }

  async send(producer: Producer): Promise<void> {
    for (const [topic, records] of this.records) await producer.send(topic, records);
    this.tally.rows += this.records.get(Channels.results.topic)?.length ?? 0;
  }

  private post(topic: string, record: ProducerRecord): void {
    const records = this.records.get(topic);
    if (records) records.push(record);
    else this.records.set(topic, [record]);
  }
}
