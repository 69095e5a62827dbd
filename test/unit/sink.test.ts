import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DETECTIONS, FRAMES } from '../../apps/index.js';
import {
  createMemoryBus,
  dropContract,
  ErrorCode,
  planContract,
  PanoptesError,
  resultRowContract,
  silentLogger,
  statsContract,
  Topics,
  type MemoryBus,
  type Plan,
  type ResultRow,
  type Stats,
  type TableSpec,
} from '../../core/index.js';
import { createChdbSink, createSinkWorker, createTableSql, DROPS_TABLE, type ResultSink } from '../../sinks/index.js';
import { CURRENT_DIALECT, dialectOf, retentionIn, rowProblem } from '../../sinks/schema.js';
import { detection } from '../conformance/sink.suite.js';
import { waitFor } from '../conformance/wait-for.js';

const scratch = mkdtempSync(join(tmpdir(), 'panoptes-sink-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('createTableSql', () => {
  it('creates the raw table: a ReplacingMergeTree partitioned by day, keyed by the sort key with row_id last', () => {
    const sql = createTableSql(DETECTIONS);
    expect(sql).toMatch(/^CREATE TABLE IF NOT EXISTS `detections_raw` \(/);
    expect(sql).toMatch(/ENGINE = ReplacingMergeTree\(inserted_at\) PARTITION BY toYYYYMMDD\(`frame_time`\) ORDER BY \(`app`, `source`, `frame_seq`, `row_id`\)$/);
    for (const column of ['`row_id` String', '`app` String', '`source` String', '`frame_seq` UInt64', '`frame_time` DateTime64(3)', '`score` Float32', '`inserted_at` DateTime64(3)']) {
      expect(sql).toContain(column);
    }
  });

  it('adds a TTL for the retention, where the dialect has TTL', () => {
    expect(createTableSql(DETECTIONS, CURRENT_DIALECT, 30)).toMatch(/ORDER BY \(.*\) TTL toDateTime\(`frame_time`\) \+ INTERVAL 30 DAY$/);
    expect(createTableSql(DETECTIONS, dialectOf('18.16.1'), 30)).not.toContain('TTL');
    expect(createTableSql(DETECTIONS, dialectOf('18.16.1'))).toContain('`frame_time` DateTime,');
    expect(createTableSql(DETECTIONS, dialectOf('24.8.4.13'), 30)).toContain('TTL');
  });

  it('does not partition drops by their time, which a second write of the same drop changes', () => {
    expect(createTableSql(DROPS_TABLE)).not.toContain('PARTITION BY');
    expect(createTableSql(DROPS_TABLE, CURRENT_DIALECT, 7)).toMatch(/TTL toDateTime\(`at`\) \+ INTERVAL 7 DAY$/);
  });

  it('reads the retention back from engine_full as servers print it', () => {
    expect(retentionIn('ReplacingMergeTree(inserted_at) PARTITION BY toYYYYMMDD(frame_time) ORDER BY (row_id) TTL toDateTime(frame_time) + toIntervalDay(30) SETTINGS index_granularity = 8192')).toBe(30);
    expect(retentionIn('ReplacingMergeTree(inserted_at) ORDER BY (row_id) SETTINGS index_granularity = 8192')).toBeUndefined();
  });

  it('appends row_id to an empty sort key', () => {
    expect(createTableSql({ name: 'events', columns: [{ name: 'n', type: 'Int64' }], orderBy: [] })).toMatch(/ORDER BY \(`row_id`\)$/);
  });

  it('refuses identifiers that are not lower-case SQL identifiers', () => {
    const good: TableSpec = { name: 'events', columns: [{ name: 'n', type: 'Int64' }], orderBy: ['n'] };
    expect(() => createTableSql(good)).not.toThrow();
    for (const name of ['Events', 'events; DROP TABLE drops', '1events', 'ev-ents', '', 'ev`ents']) {
      expect(() => createTableSql({ ...good, name }), name).toThrow();
    }
    expect(() => createTableSql({ ...good, columns: [{ name: 'n) ENGINE = Memory --', type: 'Int64' }] })).toThrow();
    expect(() => createTableSql({ ...good, orderBy: ['n DESC'] })).toThrow();
  });
});

describe('rowProblem', () => {
  const row = (fields: ResultRow['fields']): ResultRow => ({ ...detection(1, 0), fields });

  it('accepts a row that fits its table', () => {
    expect(rowProblem(DETECTIONS, detection(1, 0))).toBeUndefined();
    expect(rowProblem(DETECTIONS, row({}))).toBeUndefined();
    expect(rowProblem({ name: 't', columns: [{ name: 'flag', type: 'UInt8' }], orderBy: [] }, row({ flag: true }))).toBeUndefined();
  });

  it('names an unknown column', () => {
    expect(rowProblem(DETECTIONS, row({ ...detection(1, 0).fields, colour: 'red' }))).toContain('colour');
  });

  it('refuses null', () => {
    expect(rowProblem(DETECTIONS, row({ class: null }))).toContain('class');
  });

  it('refuses a string in a Float32 column and a number in a String column', () => {
    expect(rowProblem(DETECTIONS, row({ score: '0.9' }))).toContain('score');
    expect(rowProblem(DETECTIONS, row({ class: 3 }))).toContain('class');
    expect(rowProblem(DETECTIONS, row({ score: true }))).toContain('score');
  });

  it('refuses numbers ClickHouse would reject or wrap: negative, fractional or too large integers', () => {
    expect(rowProblem(FRAMES, row({ objects: -1 }))).toContain('objects');
    expect(rowProblem(FRAMES, row({ objects: 1.5 }))).toContain('integer');
    expect(rowProblem(FRAMES, row({ width: 5e9 }))).toContain('width');
    expect(rowProblem(DETECTIONS, row({ frame_time: 1.5 }))).toContain('frame_time');
    expect(rowProblem(DETECTIONS, row({ frame_seq: 2 ** 70 }))).toContain('frame_seq');
    expect(rowProblem(DETECTIONS, row({ score: 1e300 }))).toContain('Float32');
    expect(rowProblem(FRAMES, row({ objects: 4, width: 768, height: 432 }))).toBeUndefined();
  });

  it('refuses NaN and infinities', () => {
    expect(rowProblem(DETECTIONS, row({ score: Number.NaN }))).toContain('score');
    expect(rowProblem(DETECTIONS, row({ x1: Number.POSITIVE_INFINITY }))).toContain('x1');
  });

  it('refuses a version more than an hour ahead of its clock, which no later write could replace', () => {
    const now = 1_700_000_000_000;
    expect(rowProblem(DETECTIONS, { ...detection(1, 0), versionMs: now + 60_000 }, now)).toBeUndefined();
    expect(rowProblem(DETECTIONS, { ...detection(1, 0), versionMs: now + 2 * 3_600_000 }, now)).toMatch(/versionMs .* more than an hour ahead/);
  });
});

describe('sink worker', () => {
  const path = join(scratch, 'worker');
  let sink: ResultSink;
  let bus: MemoryBus | undefined;
  let worker: ReturnType<typeof createSinkWorker> | undefined;
  let tableNo = 0;

  beforeAll(() => {
    sink = createChdbSink({ path, logger: silentLogger() });
  });
  afterEach(async () => {
    await worker?.close();
    await bus?.close();
    worker = undefined;
    bus = undefined;
  });
  afterAll(async () => {
    await sink.close();
  });

  /** A table of its own for each test. */
  const table = (): TableSpec => ({
    name: `w${++tableNo}_events`,
    columns: [
      { name: 'n', type: 'UInt32' },
      { name: 'label', type: 'String' },
    ],
    orderBy: ['source', 'n'],
  });
  const row = (t: TableSpec, n: number, source = 'cam-1'): ResultRow => ({
    app: 'test',
    table: t.name,
    rowId: `${t.name}/${source}/${n}`,
    source,
    fields: { n, label: `event, "${n}"\n` },
  });

  async function startWorker(t: TableSpec, resultSink: ResultSink = sink, flushMs = 10): Promise<MemoryBus> {
    bus = createMemoryBus({ retryInitialMs: 5, retryMaxMs: 20 });
    await bus.createTopics([Topics.results, Topics.drops, Topics.stats, Topics.plan, Topics.dead].map((name) => ({ name, partitions: 3 })));
    worker = createSinkWorker({ bus, sink: resultSink, tables: [t], batchRows: 40, flushMs, logger: silentLogger() });
    await worker.start();
    return bus;
  }

  /** The sink's group has committed everything produced to `topic`. */
  async function caughtUp(b: MemoryBus, topic: string, groupId = 'panoptes.sink'): Promise<boolean> {
    const committed = new Map((await b.committed(groupId, topic)).map((c) => [c.partition, c.offset]));
    return (await b.endOffsets(topic)).every((end) => (committed.get(end.partition) ?? 0) === end.offset);
  }

  const send = async (b: MemoryBus, topic: string, records: { key: string; value: Uint8Array }[]): Promise<void> => {
    const producer = b.producer();
    await producer.send(topic, records);
    await producer.close();
  };

  it('stores rows published on panoptes.results and commits to the end', async () => {
    const t = table();
    const b = await startWorker(t);
    const rows = Array.from({ length: 100 }, (_, n) => row(t, n, `cam-${n % 4}`));
    await send(b, Topics.results, rows.slice(0, 60).map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await send(b, Topics.results, rows.slice(60).map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await waitFor(() => caughtUp(b, Topics.results), 'the sink group to commit every result', { timeoutMs: 10_000 });
    const ends = await b.endOffsets(Topics.results);
    expect(ends.reduce((sum, e) => sum + e.offset, 0)).toBe(100);

    const stored = await sink.query(`SELECT row_id, source, n, label FROM ${t.name} ORDER BY n`);
    expect(stored.rows).toHaveLength(100);
    expect(stored.rows.map((r) => r.n)).toEqual(rows.map((_, n) => n));
    expect(stored.rows[7]).toEqual({ row_id: rows[7]?.rowId, source: 'cam-3', n: 7, label: 'event, "7"\n' });
    expect(worker?.status()).toMatchObject({ state: 'running', rowsDropped: 0 });
    expect(worker?.status().rowsInserted).toBe(100);
  });

  it('finishing, stores what it holds at once, and what comes after as it comes, instead of a flush interval later', async () => {
    const t = table();
    const b = await startWorker(t, sink, 60_000);
    const rows = Array.from({ length: 10 }, (_, n) => row(t, n));
    await send(b, Topics.results, rows.slice(0, 5).map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await new Promise((r) => setTimeout(r, 200));
    // Held for the flush interval (a minute here).
    expect(await caughtUp(b, Topics.results)).toBe(false);
    worker!.finish();
    await waitFor(() => caughtUp(b, Topics.results), 'the held rows stored', { timeoutMs: 5_000 });
    await send(b, Topics.results, rows.slice(5).map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await waitFor(() => caughtUp(b, Topics.results), 'the later rows stored', { timeoutMs: 5_000 });
    expect((await sink.query(`SELECT count() AS n FROM ${t.name}`)).rows).toEqual([{ n: 10 }]);
  });

  it('turns an invalid row and an undecodable message into drops and stores the rest', async () => {
    const t = table();
    const b = await startWorker(t);
    const good = [row(t, 1, 'w-good'), row(t, 2, 'w-good'), row(t, 3, 'w-good')];
    const invalid: ResultRow = { ...row(t, 4, 'w-bad'), fields: { n: 4, colour: 'red' } };
    const garbage = new Uint8Array(randomBytes(64));
    garbage[0] = 0x00;
    await send(b, Topics.results, [
      { key: 'w-good', value: resultRowContract.encode(good[0] as ResultRow) },
      { key: 'w-bad', value: resultRowContract.encode(invalid) },
      { key: 'w-good', value: resultRowContract.encode(good[1] as ResultRow) },
      { key: 'w-garbage', value: garbage },
      { key: 'w-good', value: resultRowContract.encode(good[2] as ResultRow) },
    ]);
    await send(b, Topics.drops, [
      { key: 'w-dropped', value: dropContract.encode({ what: 'frame', where: 'backend:test', why: 'deadline', source: 'w-dropped', frameSeq: 12, atMs: 1_700_000_000_000 }) },
    ]);
    await waitFor(async () => (await caughtUp(b, Topics.results)) && caughtUp(b, Topics.drops), 'the sink group to commit', { timeoutMs: 10_000 });

    const stored = await sink.query(`SELECT n FROM ${t.name} ORDER BY n`);
    expect(stored.rows.map((r) => r.n)).toEqual([1, 2, 3]);

    const drops = await sink.query(
      `SELECT what, stage, reason, source, frame_seq, detail FROM ${DROPS_TABLE.name} WHERE source LIKE 'w-%' ORDER BY reason`,
    );
    expect(drops.rows.map((r) => r.reason)).toEqual(['deadline', 'decode', 'invalid-row']);
    const [deadline, decode, invalidRow] = drops.rows;
    expect(deadline).toMatchObject({ what: 'frame', stage: 'backend:test', source: 'w-dropped', frame_seq: 12 });
    expect(decode).toMatchObject({ what: 'row', stage: 'sink' });
    expect(decode?.source).toBe('w-garbage');
    const [deadLetter] = (await b.endOffsets(Topics.dead)).filter((p) => p.offset > 0);
    expect(deadLetter?.offset).toBe(1);
    expect(invalidRow).toMatchObject({ what: 'row', stage: 'sink' });
    expect(invalidRow?.source).toBe('w-bad');
    expect(String(invalidRow?.detail)).toContain('colour');
    expect(worker?.status().rowsDropped).toBe(2);
  });

  it('drops a row whose number does not fit its column and stores the rows around it', async () => {
    const t = table();
    const b = await startWorker(t);
    const rows = [row(t, 1, 'n-good'), { ...row(t, 2, 'n-bad'), fields: { n: -1, label: 'x' } }, row(t, 3, 'n-good')];
    await send(b, Topics.results, rows.map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await waitFor(() => caughtUp(b, Topics.results), 'the sink group to commit', { timeoutMs: 10_000 });
    const stored = await sink.query(`SELECT n FROM ${t.name} ORDER BY n`);
    expect(stored.rows.map((r) => r.n)).toEqual([1, 3]);
    const drops = await sink.query(`SELECT reason, detail FROM ${DROPS_TABLE.name} WHERE source LIKE 'n-bad%'`);
    expect(drops.rows).toHaveLength(1);
    expect(drops.rows[0]).toMatchObject({ reason: 'invalid-row' });
    expect(String(drops.rows[0]?.detail)).toContain('-1');
  });

  it('stores the rows beside a hostile message: a lone surrogate in a string, a drop at a fractional time', async () => {
    const t = table();
    const b = await startWorker(t);
    const rows = [row(t, 1, 's-good'), { ...row(t, 2, 's-surrogate'), fields: { n: 2, label: 'bad \ud800 half' } }, row(t, 3, 's-good')];
    await send(b, Topics.results, rows.map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    await send(b, Topics.drops, [
      { key: 's-fraction', value: dropContract.encode({ what: 'frame', where: 'backend:test', why: 'deadline', source: 's-fraction', frameSeq: 1, atMs: 1.5 }) },
      { key: 's-later', value: dropContract.encode({ what: 'frame', where: 'backend:test', why: 'deadline', source: 's-later', frameSeq: 2, atMs: 1e300, detail: 'x\ud83d' }) },
      { key: 's-fine', value: dropContract.encode({ what: 'frame', where: 'backend:test', why: 'deadline', source: 's-fine', frameSeq: 3, atMs: 1_700_000_000_000 }) },
    ]);
    await waitFor(async () => (await caughtUp(b, Topics.results)) && caughtUp(b, Topics.drops), 'the sink group to commit', { timeoutMs: 10_000 });
    // The surrogate is read as U+FFFD, as bad UTF-8 is: the row is kept, and the insert beside it too.
    const stored = await sink.query(`SELECT n, label FROM ${t.name} ORDER BY n`);
    expect(stored.rows).toEqual([{ n: 1, label: 'event, "1"\n' }, { n: 2, label: 'bad \ufffd half' }, { n: 3, label: 'event, "3"\n' }]);
    const drops = await sink.query(`SELECT source, reason, detail FROM ${DROPS_TABLE.name} WHERE source LIKE 's-%' ORDER BY source`);
    expect(drops.rows.map((r) => [r.source, r.reason])).toEqual([['s-fine', 'deadline'], ['s-fraction', 'invalid-row'], ['s-later', 'invalid-row']]);
    expect(String(drops.rows[1]?.detail)).toMatch(/column "at" \(DateTime64\(3\)\)/);
  });

  it('loses nothing when inserts fail twice: every row is stored exactly once', async () => {
    const t = table();
    let failures = 0;
    let calls = 0;
    const flaky: ResultSink = {
      kind: 'chdb',
      ensureTables: (tables) => sink.ensureTables(tables),
      insert: async (spec, rows) => {
        calls += 1;
        if (spec.name === t.name && failures < 2) {
          failures += 1;
          throw new PanoptesError(ErrorCode.SinkInsert, 'the database is busy', { retriable: true });
        }
        await sink.insert(spec, rows);
      },
      query: (sql) => sink.query(sql),
      close: async () => {},
    };
    const b = await startWorker(t, flaky);
    const rows = Array.from({ length: 90 }, (_, n) => row(t, n, `cam-${n % 5}`));
    for (let i = 0; i < rows.length; i += 30) {
      await send(b, Topics.results, rows.slice(i, i + 30).map((r) => ({ key: r.source, value: resultRowContract.encode(r) })));
    }
    await waitFor(() => caughtUp(b, Topics.results), 'the sink group to commit every result', { timeoutMs: 15_000 });

    expect(failures).toBe(2);
    expect(calls).toBeGreaterThan(2);
    const stored = await sink.query(`SELECT n FROM ${t.name} ORDER BY n`);
    expect(stored.rows.map((r) => r.n)).toEqual(rows.map((_, n) => n));
    const distinct = await sink.query(`SELECT count() AS n, uniqExact(row_id) AS ids FROM ${t.name}`);
    expect(distinct.rows[0]).toEqual({ n: 90, ids: 90 });
  });

  it('uses the group id it is given', async () => {
    const t = table();
    bus = createMemoryBus();
    await bus.createTopics([Topics.results, Topics.drops, Topics.stats, Topics.plan].map((name) => ({ name, partitions: 1 })));
    worker = createSinkWorker({ bus, sink, tables: [t], batchRows: 10, flushMs: 5, logger: silentLogger(), groupId: 'sink-b' });
    await worker.start();
    await send(bus, Topics.results, [{ key: 'cam-1', value: resultRowContract.encode(row(t, 1)) }]);
    const b = bus;
    await waitFor(() => caughtUp(b, Topics.results, 'sink-b'), 'group sink-b to commit', { timeoutMs: 10_000 });
    expect(await b.committed('panoptes.sink', Topics.results)).toEqual([]);
    expect((await sink.query(`SELECT count() AS n FROM ${t.name}`)).rows[0]?.n).toBe(1);
  });

  it("stores backends' stats and the scheduler's plans, once however often they are delivered", async () => {
    const b = await startWorker(table());
    const stats: Stats = {
      backend: 'gpu-s1',
      fromMs: 1_700_000_000_000,
      toMs: 1_700_000_001_000,
      sessions: [
        { session: 'centernet@400', arrivalRate: 31.5, queueLength: 3, batchSizes: [4, 8, 6], latencyP50Ms: 80, latencyP99Ms: 190.5, dropped: 2, badRate: 0.0625 },
        { session: 'ppocr-rec@200', arrivalRate: 0, queueLength: 0, batchSizes: [], latencyP50Ms: 0, latencyP99Ms: 0, dropped: 0, badRate: 0 },
      ],
      edges: [],
      specializations: [
        { app: 'kinds', node: 'kind', source: 'road', phase: 'specialized', inputs: 200, specialized: 150, fellThrough: 30, transitions: 2, dominantSum: 5, windowSum: 70, oracleCalls: 80, intervalInputs: 10, intervalOracleCalls: 2, intervalTemplateRuns: { 'efficientnet-lite0': 9 }, intervalCascadeOracleCalls: { 'efficientnet-lite0': 1 }, retrains: 2, retrainMs: 900 },
      ],
      apps: [
        { app: 'traffic', framesRate: 10, requests: 40, late: 2, dropped: 3 },
        // From a backend that counts no requests per app.
        { app: 'game', framesRate: 1 },
      ],
      caches: [
        { app: 'detect', node: 'detect', source: 'cam/1', layer: 'conv_2/add:0', variant: 'Pool(64×C) change', frames: 200, hits: 120, checked: 10, checkedRight: 9, expectedHitRate: 0.7, expectedAccuracy: 0.98, retrains: 3, retrainMs: 450, failedRetrains: 1 },
      ],
    };
    const plan: Plan = {
      epoch: 7,
      createdAtMs: 1_700_000_002_000,
      sessions: [{ id: 'centernet@400', model: 'centernet', sloMs: 400 }],
      backends: [{ backend: 'gpu-s1', dutyCycleMs: 125, sessions: [{ session: 'centernet@400', batch: 8 }] }],
      routing: [{ session: 'centernet@400', topic: Topics.frames, weights: { 'gpu-s1': 0.75, 'gpu-s2': 0.25 } }],
    };
    for (let i = 0; i < 2; i++) {
      await send(b, Topics.stats, [{ key: stats.backend, value: statsContract.encode(stats) }]);
      await send(b, Topics.plan, [{ key: 'plan', value: planContract.encode(plan) }]);
    }
    await waitFor(async () => (await caughtUp(b, Topics.stats)) && caughtUp(b, Topics.plan), 'the sink group to commit stats and plans', { timeoutMs: 10_000 });

    const stored = await sink.query(
      "SELECT session, toUnixTimestamp(at) AS s, interval_ms, batches, mean_batch, max_batch, arrival_rate, latency_p99_ms, dropped, bad_rate FROM session_stats WHERE backend = 'gpu-s1' ORDER BY session",
    );
    expect(stored.rows).toEqual([
      { session: 'centernet@400', s: 1_700_000_001, interval_ms: 1000, batches: 3, mean_batch: 6, max_batch: 8, arrival_rate: 31.5, latency_p99_ms: 190.5, dropped: 2, bad_rate: 0.0625 },
      { session: 'detect/detect', s: 1_700_000_001, interval_ms: 1000, batches: 0, mean_batch: 0, max_batch: 0, arrival_rate: 0, latency_p99_ms: 0, dropped: 0, bad_rate: 0 },
      { session: 'kinds/kind', s: 1_700_000_001, interval_ms: 1000, batches: 0, mean_batch: 0, max_batch: 0, arrival_rate: 0, latency_p99_ms: 0, dropped: 0, bad_rate: 0 },
      { session: 'ppocr-rec@200', s: 1_700_000_001, interval_ms: 1000, batches: 0, mean_batch: 0, max_batch: 0, arrival_rate: 0, latency_p99_ms: 0, dropped: 0, bad_rate: 0 },
    ]);
    // Table 5.4 for the specialized node, per stream; a session's row leaves it empty.
    const table54 = await sink.query("SELECT session, stream, special_rate, cascade_rate, transitions, mean_dominant, mean_window FROM session_stats WHERE backend = 'gpu-s1' AND session IN ('kinds/kind', 'centernet@400') ORDER BY session");
    expect(table54.rows).toEqual([
      { session: 'centernet@400', stream: '', special_rate: 0, cascade_rate: 0, transitions: 0, mean_dominant: 0, mean_window: 0 },
      { session: 'kinds/kind', stream: 'road', special_rate: 0.75, cascade_rate: 0.2, transitions: 2, mean_dominant: 2.5, mean_window: 35 },
    ]);
    // A cached node's row per stream: hit rates and accuracies, expected beside observed.
    const cached = await sink.query(
      "SELECT session, stream, cache_layer, cache_variant, round(hit_rate, 3) AS hit_rate, round(expected_hit_rate, 3) AS expected_hit_rate, checked_hits, round(observed_accuracy, 3) AS observed_accuracy, round(expected_accuracy, 3) AS expected_accuracy, retrains, retrain_ms, failed_retrains FROM session_stats WHERE backend = 'gpu-s1' AND cache_layer != ''",
    );
    expect(cached.rows).toEqual([
      { session: 'detect/detect', stream: 'cam/1', cache_layer: 'conv_2/add:0', cache_variant: 'Pool(64×C) change', hit_rate: 0.6, expected_hit_rate: 0.7, checked_hits: 10, observed_accuracy: 0.9, expected_accuracy: 0.98, retrains: 3, retrain_ms: 450, failed_retrains: 1 },
    ]);
    // Per app: its requests on time, late or dropped.
    const apps = await sink.query("SELECT app, toUnixTimestamp(at) AS s, interval_ms, frames_rate, requests, late, dropped, round(slo_attainment, 3) AS slo_attainment FROM app_stats WHERE backend = 'gpu-s1' ORDER BY app");
    expect(apps.rows).toEqual([
      { app: 'game', s: 1_700_000_001, interval_ms: 1000, frames_rate: 1, requests: 0, late: 0, dropped: 0, slo_attainment: 1 },
      { app: 'traffic', s: 1_700_000_001, interval_ms: 1000, frames_rate: 10, requests: 40, late: 2, dropped: 3, slo_attainment: 0.875 },
    ]);
    const plans = await sink.query("SELECT epoch, backend, duty_cycle_ms, session, model, slo_ms, batch, routing FROM plans WHERE backend = 'gpu-s1'");
    expect(plans.rows).toEqual([{ epoch: 7, backend: 'gpu-s1', duty_cycle_ms: 125, session: 'centernet@400', model: 'centernet', slo_ms: 400, batch: 8, routing: '{"panoptes.frames":0.75}' }]);
  });
});
