/**
 * The ResultSink conformance suite: what every adapter (chDB, a ClickHouse server) must do, per
 * `sinks/types.ts`. Queries stay within SQL both chDB 26.x and Debian's server 18.16 accept
 * (times compared to the second: 18.16 has no DateTime64).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DETECTIONS, FRAMES } from '../../apps/index.js';
import { appSpecSchema, ErrorCode, loadConfigFile, PanoptesError, projectRoot, type ResultRow } from '../../core/index.js';
import type { QueryLimits, ResultSink } from '../../sinks/index.js';

export interface SinkFactory {
  /** A sink on the suite's own database; `readOnly` opens one that must refuse writes. */
  open(readOnly: boolean, limits?: QueryLimits): Promise<ResultSink>;
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
    const open = async (): Promise<ResultSink> => (writer ??= await factory.open(false));

    afterAll(async () => {
      await writer?.close();
      await factory.cleanup?.();
    });

    it('creates tables, and creating them again is fine', async () => {
      const sink = await open();
      await sink.ensureTables([DETECTIONS, FRAMES]);
      await sink.ensureTables([DETECTIONS, FRAMES]);
      const tables = await sink.query('SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name');
      expect(tables.rows.map((r) => r.name)).toEqual(['detections', 'drops', 'frames']);
    });

    it('stores rows and reads them back', async () => {
      const sink = await open();
      const rows = [detection(1, 0), detection(1, 1), detection(2, 0, 'cam-2')];
      await sink.insert(DETECTIONS, rows);
      await sink.insert(DETECTIONS, []);
      const result = await sink.query(
        'SELECT row_id, app, source, frame_seq, toUnixTimestamp(frame_time) AS s, class, score, x2 FROM detections FINAL ORDER BY row_id',
      );
      expect(result.columns.map((c) => c.name)).toEqual(['row_id', 'app', 'source', 'frame_seq', 's', 'class', 'score', 'x2']);
      expect(result.rows).toHaveLength(3);
      expect(result.rows[0]).toMatchObject({ row_id: 'traffic/cam-1/1/detect/0', app: 'traffic', source: 'cam-1', frame_seq: 1, s: 1_700_000_000, class: 'car', x2: 30.5 });
      expect(result.rows[0]?.score).toBeCloseTo(0.5, 5);
      expect(result.rows[2]).toMatchObject({ row_id: 'traffic/cam-2/2/detect/0', source: 'cam-2', frame_seq: 2 });
    });

    it('keeps one copy of a row inserted twice (FINAL)', async () => {
      const sink = await open();
      const rows = [detection(10, 0), detection(10, 1)];
      await sink.insert(DETECTIONS, rows);
      await sink.insert(DETECTIONS, rows);
      const final = await sink.query('SELECT count() AS n FROM detections FINAL WHERE frame_seq = 10');
      expect(final.rows[0]?.n).toBe(2);
    });

    it('answers an empty-result query with no rows and a bad query with PANOPTES_QUERY_FAILED', async () => {
      const sink = await open();
      const empty = await sink.query("SELECT row_id FROM detections WHERE row_id = 'nothing'");
      expect(empty.rows).toEqual([]);
      expect((await rejected(() => sink.query('SELECT * FROM no_such_table'))).code).toBe(ErrorCode.QueryFailed);
    });

    it("runs every saved query of the shipped apps", async () => {
      const sink = await open();
      const dir = join(projectRoot(), 'configs/apps');
      const queries = readdirSync(dir)
        .filter((file) => file.endsWith('.yaml'))
        .flatMap((file) => Object.entries(loadConfigFile(appSpecSchema, join(dir, file)).queries).map(([query, sql]) => ({ name: `${file}:${query}`, sql })));
      expect(queries.length).toBeGreaterThan(0);
      for (const { name, sql } of queries) await expect(sink.query(sql), name).resolves.toHaveProperty('rows');
    });

    it('opened read-only, refuses every write however it is dressed up, but answers SELECTs', async () => {
      await writer?.close();
      writer = undefined;
      const reader = await factory.open(true);
      try {
        for (const [i, sql] of WRITES.entries()) {
          const err = await rejected(() => reader.query(sql));
          // The plain ones must say read-only; a disguised one may fail earlier, as bad SQL.
          expect(i < 4 ? [ErrorCode.QueryReadOnly] : [ErrorCode.QueryReadOnly, ErrorCode.QueryFailed], sql).toContain(err.code);
        }
        // Whatever each was refused as, nothing changed.
        const count = await reader.query('SELECT count() AS n FROM detections FINAL');
        expect(count.rows[0]?.n).toBe(5);
        expect((await rejected(() => reader.insert(DETECTIONS, [detection(99, 0)]))).code).toBe(ErrorCode.SinkInsert);
        expect((await reader.query('SELECT count() AS n FROM detections FINAL')).rows[0]?.n).toBe(5);
        const tables = await reader.query('SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name');
        expect(tables.rows.map((r) => r.name)).toEqual(['detections', 'drops', 'frames']);
      } finally {
        await reader.close();
      }
    });

    it('stops a read-only query at its row limit and its time limit, saying which', async () => {
      const reader = await factory.open(true, { maxResultRows: 1000, maxExecutionS: 1 });
      try {
        expect((await reader.query('SELECT number FROM system.numbers LIMIT 1000')).rows).toHaveLength(1000);
        const tooMany = await rejected(() => reader.query('SELECT number FROM system.numbers LIMIT 2000'));
        expect(tooMany.code).toBe(ErrorCode.QueryFailed);
        expect(tooMany.message).toMatch(/limit for result exceeded/i);
        const tooLong = await rejected(() => reader.query('SELECT count() FROM system.numbers'));
        expect(tooLong.code).toBe(ErrorCode.QueryFailed);
        expect(tooLong.message).toMatch(/timeout exceeded/i);
        // The limits are the sink's, not the query's to lift.
        expect((await rejected(() => reader.query('SELECT number FROM system.numbers LIMIT 2000 SETTINGS max_result_rows = 0'))).code).toBe(ErrorCode.QueryReadOnly);
      } finally {
        await reader.close();
      }
    });

    it('reports a table that exists with another schema, naming the column and the fix', async () => {
      const sink = await open(); // after the read-only tests, which closed the first writer
      const changed = { ...FRAMES, name: 'frames_v0', columns: FRAMES.columns.filter((c) => c.name !== 'objects') };
      await sink.ensureTables([changed]);
      const err = await rejected(() => sink.ensureTables([{ ...FRAMES, name: 'frames_v0' }]));
      expect(err.code).toBe(ErrorCode.SinkSchemaMismatch);
      expect(err.message).toContain('column objects is missing (ALTER TABLE frames_v0 ADD COLUMN objects UInt32)');
    });
  });
}
