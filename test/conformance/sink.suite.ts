/**
 * The ResultSink conformance suite: what every adapter (chDB, a ClickHouse server) must do, per
 * `sinks/types.ts`. Queries stay within SQL both chDB 26.x and Debian's server 18.16 accept
 * (times compared to the second: 18.16 has no DateTime64).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { APP_TABLES, DETECTIONS, FRAMES, RECOGNITIONS } from '../../apps/index.js';
import { appSpecSchema, ErrorCode, loadConfigFile, PanoptesError, projectRoot, type ResultRow, type TableSpec } from '../../core/index.js';
import type { QueryLimits, ResultSink } from '../../sinks/index.js';

export interface SinkOpenOptions {
  /** A sink that must refuse writes. */
  readOnly?: boolean;
  limits?: QueryLimits;
  retentionDays?: number;
}

export interface SinkFactory {
  /** A sink on the suite's own database. */
  open(options?: SinkOpenOptions): Promise<ResultSink>;
  /** Runs a statement outside the port (to set up what an older version left), with no sink open. */
  execute(sql: string): Promise<void>;
  /** Reads the engine's own tables (system.tables), which queries through the port may not. */
  rows(sql: string): Promise<Record<string, unknown>[]>;
  /** Closes whatever `open` left open (chDB allows one session per folder). */
  cleanup?(): Promise<void>;
}

/** Runs `fn`, expecting a PanoptesError, and returns it. */
async function rejected(fn: () => Promise<unknown>): Promise<PanoptesError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PanoptesError);
    return err as PanoptesError;
  }
  throw new Error('expected an error, none was thrown');
}

/** A detection row of frame `seq`, the `i`th on it. */
export const detection = (seq: number, i: number, source = 'cam-1'): ResultRow => ({
  app: 'traffic',
  table: 'detections',
  rowId: `traffic/${source}/${seq}/detect/${i}`,
  source,
  fields: { frame_seq: seq, frame_time: 1_700_000_000_000 + seq * 500, node: 'detect', class: 'car', score: 0.5 + i / 100, x1: 1, y1: 2, x2: 30.5, y2: 40 },
});

/** Writes a read-only sink must refuse, however they are dressed up. */
const WRITES = [
  "INSERT INTO detections (row_id) VALUES ('x')",
  'DROP TABLE detections',
  'TRUNCATE TABLE drops',
  'SELECT 1 SETTINGS readonly=0',
  '/* SELECT */ DROP TABLE detections',
  'SELECT 1; DROP TABLE detections',
  '-- a comment\nALTER TABLE detections DELETE WHERE 1',
  "SELECT * FROM url('http://127.0.0.1:9/', CSV, 'a String')",
  "INSERT INTO FUNCTION file('x.csv', 'CSV', 'a String') VALUES ('x')",
];

export function describeSinkConformance(name: string, factory: SinkFactory): void {
  describe(`ResultSink conformance: ${name}`, () => {
    let writer: ResultSink | undefined;
    const open = async (): Promise<ResultSink> => (writer ??= await factory.open());
    const closeWriter = async (): Promise<void> => {
      await writer?.close();
      writer = undefined;
    };
    /** Statements outside the port, with the suite's writer closed while they run. */
    const execute = async (...statements: string[]): Promise<void> => {
      await closeWriter();
      for (const sql of statements) await factory.execute(sql);
    };
    /** Whether the engine is 20.1 or newer: DateTime64 and TTL (the suite also runs on 18.16). */
    const modern = async (): Promise<boolean> => Number(String((await (await open()).query('SELECT version() AS v')).rows[0]?.v).split('.')[0]) >= 20;
    const tableList = async (): Promise<unknown[]> => factory.rows('SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name');

    afterAll(async () => {
      await writer?.close();
      await factory.cleanup?.();
    });

    it('creates each table as a raw table behind a view, and creating them again is fine', async () => {
      const sink = await open();
      await sink.ensureTables([DETECTIONS, FRAMES]);
      await sink.ensureTables([DETECTIONS, FRAMES]);
      const names = ['app_stats', 'detections', 'drops', 'frames', 'plans', 'session_stats'];
      expect(await tableList()).toEqual(names.flatMap((name) => [{ name, engine: 'View' }, { name: `${name}_raw`, engine: 'ReplacingMergeTree' }]));
    });

    it('stores rows and reads them back', async () => {
      const sink = await open();
      const rows = [detection(1, 0), detection(1, 1), detection(2, 0, 'cam-2')];
      await sink.insert(DETECTIONS, rows);
      await sink.insert(DETECTIONS, []);
      const result = await sink.query(
        'SELECT row_id, app, source, frame_seq, toUnixTimestamp(frame_time) AS s, class, score, x2 FROM detections ORDER BY row_id',
      );
      expect(result.columns.map((c) => c.name)).toEqual(['row_id', 'app', 'source', 'frame_seq', 's', 'class', 'score', 'x2']);
      expect(result.rows).toHaveLength(3);
      expect(result.rows[0]).toMatchObject({ row_id: 'traffic/cam-1/1/detect/0', app: 'traffic', source: 'cam-1', frame_seq: 1, s: 1_700_000_000, class: 'car', x2: 30.5 });
      expect(result.rows[0]?.score).toBeCloseTo(0.5, 5);
      expect(result.rows[2]).toMatchObject({ row_id: 'traffic/cam-2/2/detect/0', source: 'cam-2', frame_seq: 2 });
    });

    it('counts a row inserted twice once in the view users query, before any merge', async () => {
      const sink = await open();
      const rows = [detection(10, 0), detection(10, 1)];
      await sink.insert(DETECTIONS, rows);
      await sink.insert(DETECTIONS, rows);
      expect((await sink.query('SELECT count() AS n FROM detections WHERE frame_seq = 10')).rows[0]?.n).toBe(2);
    });

    it('reads a row written again within one batch as its last version', async () => {
      const sink = await open();
      // Versions without `versionMs` (a message handled twice) sharing a batch: the last one stands.
      const versions = Array.from({ length: 40 }, (_, k) => ({ ...detection(20, 0), fields: { ...detection(20, 0).fields, class: `version-${k}` } }));
      await sink.insert(DETECTIONS, versions);
      expect((await sink.query('SELECT class FROM detections WHERE frame_seq = 20')).rows).toEqual([{ class: 'version-39' }]);
    });

    it('reads a row written twice as the version made last, whichever is inserted last', async () => {
      const sink = await open();
      // A late identity's revision of a track event can reach the store before the first version.
      const version = (versionMs: number, klass: string): ResultRow => ({ ...detection(30, 0), fields: { ...detection(30, 0).fields, class: klass }, versionMs });
      await sink.insert(DETECTIONS, [version(1_700_000_005_000, 'revised')]);
      await sink.insert(DETECTIONS, [version(1_700_000_000_000, 'first')]);
      await sink.insert(DETECTIONS, [version(1_700_000_000_000, 'first'), version(1_700_000_005_000, 'revised'), version(1_700_000_000_000, 'first')]);
      expect((await sink.query('SELECT class FROM detections WHERE frame_seq = 30')).rows).toEqual([{ class: 'revised' }]);
    });

    it('answers an empty-result query with no rows and a bad query with PANOPTES_QUERY_FAILED', async () => {
      const sink = await open();
      const empty = await sink.query("SELECT row_id FROM detections WHERE row_id = 'nothing'");
      expect(empty.rows).toEqual([]);
      expect((await rejected(() => sink.query('SELECT * FROM no_such_table'))).code).toBe(ErrorCode.QueryFailed);
    });

    it("runs every saved query of the shipped apps", async () => {
      const sink = await open();
      await sink.ensureTables(APP_TABLES);
      const dir = join(projectRoot(), 'configs/apps');
      const queries = readdirSync(dir)
        .filter((file) => file.endsWith('.yaml'))
        .flatMap((file) => Object.entries(loadConfigFile(appSpecSchema, join(dir, file)).queries).map(([query, sql]) => ({ name: `${file}:${query}`, sql })));
      expect(queries.length).toBeGreaterThan(0);
      for (const { name, sql } of queries) await expect(sink.query(sql), name).resolves.toHaveProperty('rows');
    });

    it('opened read-only, refuses every write however it is dressed up, but answers SELECTs', async () => {
      await closeWriter();
      const reader = await factory.open({ readOnly: true });
      try {
        const tablesBefore = await tableList();
        const rowsBefore = (await reader.query('SELECT count() AS n FROM detections')).rows[0]?.n;
        expect(rowsBefore).toBeGreaterThan(0);
        for (const [i, sql] of WRITES.entries()) {
          const err = await rejected(() => reader.query(sql));
          // The plain ones must say read-only; a disguised one may fail earlier, as bad SQL.
          expect(i < 4 ? [ErrorCode.QueryReadOnly] : [ErrorCode.QueryReadOnly, ErrorCode.QueryFailed], sql).toContain(err.code);
        }
        // Whatever each was refused as, nothing changed.
        const count = await reader.query('SELECT count() AS n FROM detections');
        expect(count.rows[0]?.n).toBe(rowsBefore);
        expect((await rejected(() => reader.insert(DETECTIONS, [detection(99, 0)]))).code).toBe(ErrorCode.SinkInsert);
        expect((await reader.query('SELECT count() AS n FROM detections')).rows[0]?.n).toBe(rowsBefore);
        expect(await tableList()).toEqual(tablesBefore);
      } finally {
        await reader.close();
      }
    });

    it('stops a read-only query at its row limit and its time limit, saying which', async () => {
      const reader = await factory.open({ readOnly: true, limits: { maxResultRows: 1000, maxExecutionS: 1 } });
      try {
        expect((await reader.query('SELECT n FROM (SELECT arrayJoin(range(1000)) AS n)')).rows).toHaveLength(1000);
        const tooMany = await rejected(() => reader.query('SELECT n FROM (SELECT arrayJoin(range(2000)) AS n)'));
        expect(tooMany.code).toBe(ErrorCode.QueryFailed);
        expect(tooMany.message).toMatch(/the answer is over a result limit; add a LIMIT|the answer has 2000 rows, over the limit of 1000; add a LIMIT/);
        const tooLong = await rejected(() => reader.query('SELECT sleepEachRow(1) FROM (SELECT arrayJoin(range(3)) AS a)'));
        expect(tooLong.code).toBe(ErrorCode.QueryFailed);
        expect(tooLong.message).toMatch(/the query ran past its time limit.*timeout exceeded/i);
        // The limits are the sink's, not the query's to lift.
        expect((await rejected(() => reader.query('SELECT arrayJoin(range(2000)) AS n SETTINGS max_result_rows = 0'))).code).toBe(ErrorCode.QueryReadOnly);
      } finally {
        await reader.close();
      }
    });

    it('answers within a row limit smaller than the statement, however the statement is checked', async () => {
      const reader = await factory.open({ readOnly: true, limits: { maxResultRows: 2 } });
      try {
        const sql = 'SELECT n FROM (SELECT arrayJoin(range(3)) AS n) WHERE n < 2 ORDER BY n';
        expect((await reader.query(sql)).rows).toEqual([{ n: 0 }, { n: 1 }]);
        expect((await rejected(() => reader.query(sql.replace('n < 2', 'n < 3')))).message).toMatch(/the answer (is over a result limit|has 3 rows, over the limit of 2); add a LIMIT/);
      } finally {
        await reader.close();
      }
    });

    it('adds a column a table lacks, and the view shows it', async () => {
      const sink = await open(); // after the read-only tests, which closed the first writer
      const older = { ...FRAMES, name: 'frames_v0', columns: FRAMES.columns.filter((c) => c.name !== 'objects') };
      await sink.ensureTables([older]);
      const row = (seq: number, fields: ResultRow['fields']): ResultRow => ({ app: 'traffic', table: 'frames_v0', rowId: `v0/${seq}`, source: 'cam-1', fields });
      const summary = { frame_seq: 1, frame_time: 1_700_000_000_000, node: 'detect', width: 640, height: 360, class_counts: '{}' };
      await sink.insert(older, [row(1, summary)]);
      await sink.ensureTables([{ ...FRAMES, name: 'frames_v0' }]);
      await sink.insert({ ...FRAMES, name: 'frames_v0' }, [row(2, { ...summary, frame_seq: 2, objects: 3 })]);
      expect((await sink.query('SELECT frame_seq, objects FROM frames_v0 ORDER BY frame_seq')).rows).toEqual([
        { frame_seq: 1, objects: 0 },
        { frame_seq: 2, objects: 3 },
      ]);
    });

    it('reports a column with another type, naming the column and the fix', async () => {
      const sink = await open();
      const retyped = { ...FRAMES, name: 'frames_v1', columns: FRAMES.columns.map((c) => (c.name === 'objects' ? { ...c, type: 'String' as const } : c)) };
      await sink.ensureTables([retyped]);
      const err = await rejected(() => sink.ensureTables([{ ...FRAMES, name: 'frames_v1' }]));
      expect(err.code).toBe(ErrorCode.SinkSchemaMismatch);
      expect(err.message).toContain('column objects is String, expected UInt32 (ALTER TABLE frames_v1_raw MODIFY COLUMN objects UInt32)');
    });

    it('upgrades a table from before the views in place: its rows stay and read deduplicated', async () => {
      const legacy: TableSpec = { name: 'legacy_events', columns: [{ name: 'n', type: 'UInt32' }], orderBy: ['source'] };
      const insertedAt = (await modern()) ? 'DateTime64(3) DEFAULT now64(3)' : 'DateTime DEFAULT now()';
      // How 0.1 created a results table: the table itself, queried with FINAL.
      await execute(
        `CREATE TABLE legacy_events (row_id String, app String, source String, n UInt32, inserted_at ${insertedAt}) ENGINE = ReplacingMergeTree(inserted_at) ORDER BY (source, row_id)`,
        "INSERT INTO legacy_events (row_id, app, source, n) VALUES ('a', 'test', 'cam-1', 1), ('b', 'test', 'cam-1', 2)",
        "INSERT INTO legacy_events (row_id, app, source, n) VALUES ('a', 'test', 'cam-1', 1)",
      );
      const sink = await open();
      await sink.ensureTables([legacy]);
      const names = (await tableList()).filter((t) => String((t as { name: string }).name).startsWith('legacy_events'));
      expect(names).toEqual([
        { name: 'legacy_events', engine: 'View' },
        { name: 'legacy_events_raw', engine: 'ReplacingMergeTree' },
      ]);
      expect((await sink.query('SELECT row_id, n FROM legacy_events ORDER BY row_id')).rows).toEqual([
        { row_id: 'a', n: 1 },
        { row_id: 'b', n: 2 },
      ]);
      await sink.insert(legacy, [{ app: 'test', table: 'legacy_events', rowId: 'b', source: 'cam-1', fields: { n: 2 } }]);
      expect((await sink.query('SELECT count() AS n FROM legacy_events')).rows[0]?.n).toBe(2);
    });

    it("moves 0.1's texts into recognitions, once", async () => {
      const time = (await modern()) ? 'DateTime64(3)' : 'DateTime';
      await execute(
        `CREATE TABLE texts (row_id String, app String, source String, frame_seq UInt64, frame_time ${time}, node String, text String, score Float32, ` +
          `x1 Float32, y1 Float32, x2 Float32, y2 Float32, inserted_at ${time} DEFAULT now()) ENGINE = ReplacingMergeTree(inserted_at) ORDER BY (app, source, frame_seq, row_id)`,
        "INSERT INTO texts (row_id, app, source, frame_seq, frame_time, node, text, score, x1, y1, x2, y2) VALUES ('t/1', 'game', 'cam-1', 4, toDateTime(1700000000), 'ocr', '1250', 0.9, 1, 2, 3, 4)",
      );
      const sink = await open();
      await sink.ensureTables([RECOGNITIONS]);
      await sink.ensureTables([RECOGNITIONS]);
      expect((await tableList()).map((t) => (t as { name: string }).name)).not.toContain('texts');
      const moved = await sink.query("SELECT row_id, kind, value, number, node, frame_seq, toUnixTimestamp(frame_time) AS s FROM recognitions WHERE app = 'game'");
      expect(moved.rows).toEqual([{ row_id: 't/1', kind: 'text', value: '1250', number: 1250, node: 'ocr', frame_seq: 4, s: 1_700_000_000 }]);
    });

    it('keeps rows for the configured retention where the server has TTL, and keeps them all where it has not', async () => {
      const hasTtl = await modern();
      const table = { ...DETECTIONS, name: 'retained' };
      const retention = async (retentionDays?: number): Promise<string> => {
        await closeWriter();
        const sink = await factory.open(retentionDays === undefined ? {} : { retentionDays });
        try {
          await sink.ensureTables([table]);
          return String((await factory.rows("SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'retained_raw'"))[0]?.engine_full);
        } finally {
          await sink.close();
        }
      };
      expect(await retention()).not.toContain('TTL');
      const old = detection(1, 0);
      const recent = { ...detection(2, 0), fields: { ...detection(2, 0).fields, frame_time: Date.now() } };
      await (await open()).insert(table, [old, recent]);

      const month = await retention(30);
      await execute('OPTIMIZE TABLE retained_raw FINAL');
      const kept = await (await open()).query('SELECT frame_seq FROM retained ORDER BY frame_seq');
      const week = await retention(7);
      if (hasTtl) {
        expect(month).toContain('TTL toDateTime(frame_time) + toIntervalDay(30)');
        expect(week).toContain('TTL toDateTime(frame_time) + toIntervalDay(7)');
        expect(kept.rows).toEqual([{ frame_seq: 2 }]);
      } else {
        expect(month).not.toContain('TTL');
        expect(kept.rows).toEqual([{ frame_seq: 1 }, { frame_seq: 2 }]);
      }
      expect(await retention()).not.toContain('TTL');
    });
  });
}
