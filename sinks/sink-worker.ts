import { createHash } from 'node:crypto';
import {
  Groups,
  Channels,
  deadLetter,
  describeError,
  Topics,
  type Batch,
  type Bus,
  type Consumer,
  type ProducerRecord,
  type Drop,
  type Lifecycle,
  type Logger,
  type Plan,
  type ResultRow,
  type Stats,
  type TableSpec,
} from '../core/index.js';
import { APP_STATS_TABLE, DROPS_TABLE, OPERATOR_TABLES, PLANS_TABLE, rowProblem, SESSION_STATS_TABLE } from './schema.js';
import type { ResultSink } from './types.js';

export interface SinkWorkerOptions {
  bus: Bus;
  sink: ResultSink;
  tables: readonly TableSpec[];
  /** Rows per insert round, summed over tables; also the most messages handed over at once. */
  batchRows: number;
  /** Longest a row waits for its insert, ms. */
  flushMs: number;
  logger: Logger;
  groupId?: string;
}

export interface SinkStatus {
  state: 'idle' | 'running' | 'draining' | 'closed';
  rowsInserted: number;
  rowsDropped: number;
  inserts: number;
}

export interface SinkWorker extends Lifecycle<SinkStatus> {
  /**
   * The run is ending and nothing but its last rows will come: insert what is held now, and
   * what comes after as it comes, without waiting out `flushMs` (a replay's results stored a
   * second or two sooner).
   */
  finish(): void;
}

type Waiter = { resolve: () => void; reject: (err: unknown) => void };

const TOPICS = [Topics.results, Topics.drops, Topics.stats, Topics.plan];

/** One `session_stats` row per session a backend reported on, and one per specialized or cached stream and node; one `app_stats` row per app. */
export function statsRows(stats: Stats): ResultRow[] {
  const row = (session: string, rowId: string, fields: ResultRow['fields']): ResultRow => ({
    app: 'panoptes',
    table: SESSION_STATS_TABLE.name,
    rowId: `stats:${stats.backend}:${rowId}:${stats.toMs}`,
    source: stats.backend,
    fields: {
      at: Math.round(stats.toMs),
      interval_ms: Math.max(0, Math.round(stats.toMs - stats.fromMs)),
      backend: stats.backend,
      session,
      ...UNSET_STATS,
      ...fields,
    },
  });
  const sessions = stats.sessions.map((s) =>
    row(s.session, s.session, {
      arrival_rate: s.arrivalRate,
      queue_length: s.queueLength,
      batches: s.batchSizes.length,
      mean_batch: s.batchSizes.length === 0 ? 0 : s.batchSizes.reduce((a, b) => a + b, 0) / s.batchSizes.length,
      max_batch: Math.max(0, ...s.batchSizes),
      latency_p50_ms: s.latencyP50Ms,
      latency_p99_ms: s.latencyP99Ms,
      dropped: s.dropped,
      bad_rate: s.badRate,
    }),
  );
  const specialized = (stats.specializations ?? []).map((s) =>
    row(`${s.app}/${s.node}`, `${s.app}/${s.node}:${s.source}`, {
      stream: s.source,
      special_rate: s.inputs === 0 ? 0 : s.specialized / s.inputs,
      cascade_rate: s.specialized === 0 ? 0 : s.fellThrough / s.specialized,
      transitions: s.transitions,
      mean_dominant: s.transitions === 0 ? 0 : s.dominantSum / s.transitions,
      mean_window: s.transitions === 0 ? 0 : s.windowSum / s.transitions,
      retrains: s.retrains,
      retrain_ms: s.retrainMs,
    }),
  );
  const cached = (stats.caches ?? []).map((c) =>
    row(`${c.app}/${c.node}`, `${c.app}/${c.node}:${c.source}:cache:${c.layer}`, {
      stream: c.source,
      cache_layer: c.layer,
      cache_variant: c.variant,
      hit_rate: c.frames === 0 ? 0 : c.hits / c.frames,
      expected_hit_rate: c.expectedHitRate,
      checked_hits: c.checked,
      observed_accuracy: c.checked === 0 ? 0 : c.checkedRight / c.checked,
      expected_accuracy: c.expectedAccuracy,
      retrains: c.retrains,
      retrain_ms: c.retrainMs,
      failed_retrains: c.failedRetrains,
    }),
  );
  const apps = (stats.apps ?? []).map(({ app, framesRate, requests = 0, late = 0, dropped = 0 }) => ({
    app,
    table: APP_STATS_TABLE.name,
    rowId: `app-stats:${stats.backend}:${app}:${stats.toMs}`,
    source: stats.backend,
    fields: {
      at: Math.round(stats.toMs),
      interval_ms: Math.max(0, Math.round(stats.toMs - stats.fromMs)),
      backend: stats.backend,
      frames_rate: framesRate,
      requests,
      late,
      dropped,
      slo_attainment: requests === 0 ? 1 : 1 - (late + dropped) / requests,
    },
  }));
  return [...sessions, ...specialized, ...cached, ...apps];
}

/** A session's row leaves the stream columns empty, a specialized or cached node's the session's. */
const UNSET_STATS = {
  arrival_rate: 0,
  queue_length: 0,
  batches: 0,
  mean_batch: 0,
  max_batch: 0,
  latency_p50_ms: 0,
  latency_p99_ms: 0,
  dropped: 0,
  bad_rate: 0,
  stream: '',
  special_rate: 0,
  cascade_rate: 0,
  transitions: 0,
  mean_dominant: 0,
  mean_window: 0,
  cache_layer: '',
  cache_variant: '',
  hit_rate: 0,
  expected_hit_rate: 0,
  checked_hits: 0,
  observed_accuracy: 0,
  expected_accuracy: 0,
  retrains: 0,
  retrain_ms: 0,
  failed_retrains: 0,
};

/** One `plans` row per backend and session placed on it. */
export function planRows(plan: Plan): ResultRow[] {
  const models = new Map(plan.sessions.map((s) => [s.id, s]));
  return plan.backends.flatMap((backend) =>
    backend.sessions.map(({ session, batch }) => ({
      app: 'panoptes',
      table: PLANS_TABLE.name,
      rowId: `plan:${plan.createdAtMs}:${plan.epoch}:${backend.backend}:${session}`,
      source: backend.backend,
      fields: {
        epoch: plan.epoch,
        at: Math.round(plan.createdAtMs),
        backend: backend.backend,
        duty_cycle_ms: backend.dutyCycleMs,
        session,
        model: models.get(session)?.model ?? '',
        slo_ms: models.get(session)?.sloMs ?? 0,
        batch,
        routing: JSON.stringify(Object.fromEntries(plan.routing.filter((r) => r.session === session).map((r) => [r.topic, r.weights[backend.backend] ?? 0]))),
      },
    })),
  );
}

/**
 * Consumes result rows, drops, backends' stats and plans, inserts them in batches, and lets the bus commit a message
 * only after its rows are stored: a handler call waits for the flush that carries its rows.
 * A failed insert fails every waiting handler, so their messages are delivered again; the
 * tables' row ids make the second write harmless.
 */
export function createSinkWorker(options: SinkWorkerOptions): SinkWorker {
  const logger = options.logger.child({ module: 'sinks.worker' });
  const tables = new Map([...OPERATOR_TABLES, ...options.tables].map((t) => [t.name, t]));
  const status: SinkStatus = { state: 'idle', rowsInserted: 0, rowsDropped: 0, inserts: 0 };
  let pending = new Map<string, ResultRow[]>();
  let pendingCount = 0;
  let waiters: Waiter[] = [];
  let timer: NodeJS.Timeout | undefined;
  let flushing = Promise.resolve();
  let consumer: Consumer | undefined;
  let finishing = false;
  const producer = options.bus.producer();

  const add = (rows: ResultRow[]): Promise<void> => {
    for (const row of rows) {
      const list = pending.get(row.table) ?? [];
      list.push(row);
      pending.set(row.table, list);
    }
    pendingCount += rows.length;
    const done = new Promise<void>((resolve, reject) => waiters.push({ resolve, reject }));
    if (pendingCount >= options.batchRows) void flush();
    // Finishing, rows handed over in one turn of the event loop still share an insert.
    else timer ??= setTimeout(() => void flush(), finishing ? 0 : options.flushMs);
    return done;
  };

  const flush = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    const batch = pending;
    const batchWaiters = waiters;
    const rows = pendingCount;
    pending = new Map();
    waiters = [];
    pendingCount = 0;
    // Flushes run one after another so inserts of one table keep their order.
    flushing = flushing.then(async () => {
      try {
        for (const [name, tableRows] of batch) {
          const table = tables.get(name);
          if (table) await options.sink.insert(table, tableRows);
        }
        status.rowsInserted += rows;
        status.inserts += 1;
        for (const w of batchWaiters) w.resolve();
      } catch (err) {
        logger.warn({ err, rows }, 'insert failed; the messages will be delivered again');
        for (const w of batchWaiters) w.reject(err);
      }
    });
    return flushing;
  };

  /**
   * `identity` makes the row id: the same dropped thing, delivered again, gives the same id. The
   * id names the stage's kind, not its instance: a frame dropped again by the backend that took
   * over a crashed one's partitions is still one drop.
   */
  const dropRow = (drop: Drop, identity: string, source: string): ResultRow => ({
    app: 'panoptes',
    table: DROPS_TABLE.name,
    rowId: `drop:${drop.where.split(':')[0]}:${drop.why}:${identity}`,
    source: drop.source ?? source,
    fields: {
      what: drop.what,
      stage: drop.where,
      reason: drop.why,
      frame_seq: drop.frameSeq ?? -1,
      at: drop.atMs,
      detail: drop.detail ?? '',
    },
  });

  const handle = async (batch: Batch): Promise<void> => {
    const rows: ResultRow[] = [];
    const dead: ProducerRecord[] = [];
    for (const message of batch.messages) {
      const rejected = (why: string, detail: string, identity: string, source = message.key): void => {
        status.rowsDropped += 1;
        logger.warn({ topic: batch.topic, offset: message.offset, why, detail }, 'message dropped');
        const what = batch.topic === Topics.drops ? 'message' : 'row';
        rows.push(dropRow({ what, where: 'sink', why, detail, atMs: message.timestamp }, identity, source));
      };
      try {
        if (batch.topic === Topics.drops) {
          const drop = Channels.drops.decode(message.value);
          // A frame dropped again on redelivery is the same drop: its identity leaves out the time.
          const when = drop.frameSeq === undefined ? String(drop.atMs) : String(drop.frameSeq);
          const detail = createHash('sha1').update(drop.detail ?? '').digest('hex').slice(0, 12);
          const row = dropRow(drop, `${drop.what}:${drop.source ?? message.key}:${when}:${detail}`, message.key);
          // Checked as any row is: one the store would refuse (a fractional time) would fail the insert of every row beside it.
          const problem = rowProblem(DROPS_TABLE, row);
          if (problem) rejected('invalid-row', `${row.rowId}: ${problem}`, row.rowId, row.source);
          else rows.push(row);
          continue;
        }
        const decoded =
          batch.topic === Topics.stats ? statsRows(Channels.stats.decode(message.value))
          : batch.topic === Topics.plan ? planRows(Channels.plan.decode(message.value))
          : [Channels.results.decode(message.value)];
        for (const row of decoded) {
          const table = tables.get(row.table);
          const problem = table ? rowProblem(table, row) : `no table named "${row.table}"`;
          if (problem) rejected('invalid-row', `${row.rowId}: ${problem}`, row.rowId, row.source);
          else rows.push(row);
        }
      } catch (err) {
        dead.push(deadLetter(message, 'sink', describeError(err)));
        rejected('decode', describeError(err), createHash('sha1').update(message.value).digest('hex'));
      }
    }
    if (dead.length > 0) await producer.send(Topics.dead, dead);
    if (rows.length > 0) await add(rows);
  };

  return {
    async start() {
      await options.sink.ensureTables(options.tables);
      consumer = options.bus.consumer({
        groupId: options.groupId ?? Groups.sink,
        topics: TOPICS,
        maxBatchSize: options.batchRows,
      });
      await consumer.run(handle);
      status.state = 'running';
    },
    finish() {
      finishing = true;
      if (pendingCount > 0) void flush();
    },
    async drain() {
      status.state = 'draining';
      consumer?.pause(TOPICS);
      await flush();
    },
    async close() {
      await consumer?.close();
      await flush();
      await producer.close();
      status.state = 'closed';
    },
    status: () => ({ ...status }),
  };
}
