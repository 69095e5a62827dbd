/**
 * Hostile SQL against the embedded results: whatever its text, a query reads the results
 * database and nothing else (no file read or written, no other database, no network), stays
 * within its limits, and neither its failure nor its slowness reaches another query.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DETECTIONS } from '../../apps/index.js';
import { ErrorCode, PanoptesError, projectRoot, silentLogger } from '../../core/index.js';
import { createChdbSink, createClickHouseSink, type ResultSink } from '../../sinks/index.js';
import { serverAddress, serverSkipReason } from '../servers.js';

const dir = mkdtempSync(join(tmpdir(), 'panoptes-hostile-sql-'));
const written = join(dir, 'written.txt');
let sink: ResultSink;

beforeAll(async () => {
  const writer = createChdbSink({ path: join(dir, 'clickhouse'), logger: silentLogger() });
  await writer.ensureTables([DETECTIONS]);
  await writer.insert(DETECTIONS, [{ app: 'traffic', table: 'detections', rowId: 'r1', source: 'cam', fields: { frame_seq: 1, frame_time: 1_700_000_000_000, node: 'detect', class: 'car', score: 0.9, x1: 0, y1: 0, x2: 1, y2: 1 } }]);
  await writer.close();
  sink = createChdbSink({ path: join(dir, 'clickhouse'), readOnly: true, limits: { maxResultRows: 10_000, maxExecutionS: 2, maxResultBytes: 8 * 1024 * 1024, maxMemoryBytes: 256 * 1024 * 1024 }, logger: silentLogger() });
});
afterAll(async () => {
  await sink.close();
  rmSync(dir, { recursive: true, force: true });
});

async function refusal(sql: string): Promise<PanoptesError> {
  try {
    await sink.query(sql);
  } catch (err) {
    expect(err, sql).toBeInstanceOf(PanoptesError);
    return err as PanoptesError;
  }
  throw new Error(`not refused: ${sql}`);
}

/** Statements that reach past the results; each must be refused as read-only, and change nothing. */
const ESCAPES = [
  `SELECT 'x' INTO OUTFILE '${written}' TRUNCATE FORMAT TSVRaw`,
  `SELECT 'x' INTO OUTFILE '${written}' APPEND`,
  `SHOW TABLES INTO OUTFILE '${written}'`,
  `EXPLAIN SELECT 1 INTO OUTFILE '${written}'`,
  `SELECT * FROM detections INTO OUTFILE '${written}' COMPRESSION 'gzip'`,
  "SELECT file('/proc/self/environ')",
  "SELECT FILE('/etc/passwd')",
  "SELECT arrayMap(p -> file(p), ['/etc/passwd'])",
  "SELECT * FROM detections WHERE class IN (SELECT file('/etc/hostname'))",
  "WITH file('/etc/hostname') AS f SELECT f",
  "SELECT * FROM file('/etc/passwd', 'LineAsString')",
  "SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')",
  "SELECT * FROM s3('http://127.0.0.1:9/bucket/x.csv')",
  "SELECT * FROM remote('127.0.0.1:9000', system.one)",
  "SELECT * FROM executable('id', 'LineAsString', 'x String')",
  "SELECT * FROM merge('system', '^one$')",
  "SELECT * FROM dictionary('x')",
  "SELECT dictGet('x', 'y', toUInt64(1))",
  "SELECT joinGet('x', 'y', 1)",
  "SELECT catboostEvaluate('/tmp/model.bin', 1)",
  // An alias holding `)`, which ClickHouse's AST dump prints unescaped after the function's name.
  "SELECT file('/etc/passwd') AS `a) b`",
  "SELECT substring(file('/etc/passwd') AS `x) y`, 1, 80) AS s",
  "SELECT dictGet('x', 'y', toUInt64(1)) AS `a) (children 1)`",
  "SELECT joinGet('x', 'y', 1) AS `a (alias b)`",
  'SELECT name FROM system.users AS `u) v`',
  "SELECT getServerSetting('path')",
  "SELECT getMergeTreeSetting('index_granularity')",
  'SELECT hostName(), getOSKernelVersion(), filesystemAvailable()',
  "EXPLAIN TABLE OVERRIDE mysql('127.0.0.1:9', 'db', 't', 'u', 'p') PARTITION BY x",
  "SELECT hasColumnInTable('system', 'users', 'name')",
  'SELECT * FROM system.users',
  'SELECT name, value FROM system.settings',
  'SELECT query FROM system.processes',
  'SELECT 1 IN system.one',
  'DESCRIBE TABLE system.users',
  'SHOW TABLES FROM system',
  'SHOW CREATE TABLE system.users',
  'SELECT * FROM information_schema.tables',
  'SHOW PROCESSLIST',
  'SHOW USERS',
  "SHOW SETTINGS LIKE 'max%'",
  'SHOW CLUSTERS',
  'SHOW MERGES',
  'SHOW DICTIONARIES',
  'SHOW FILESYSTEM CACHES',
  'SHOW TEMPORARY TABLES',
  'SYSTEM SHUTDOWN',
  'KILL QUERY WHERE 1',
  'SET readonly = 0',
  'SELECT 1 SETTINGS readonly = 0',
  "INSERT INTO detections_raw (row_id) VALUES ('x')",
  "INSERT INTO FUNCTION file('/tmp/x.csv', 'CSV', 'a String') VALUES ('x')",
  'CREATE TABLE x (a UInt8) ENGINE = Memory',
  "CREATE DICTIONARY d (a UInt64) PRIMARY KEY a SOURCE(FILE(path '/etc/passwd' format 'CSV')) LAYOUT(FLAT()) LIFETIME(0)",
  'DROP TABLE detections',
  'TRUNCATE TABLE detections_raw',
  'ALTER TABLE detections_raw DELETE WHERE 1',
  'OPTIMIZE TABLE detections_raw FINAL',
  "BACKUP TABLE detections_raw TO File('/tmp/b')",
  'ATTACH TABLE x',
];

describe('hostile SQL on the embedded results', () => {
  it(`refuses each of ${ESCAPES.length} ways out of the results as read-only, and nothing is written or changed`, async () => {
    for (const sql of ESCAPES) {
      const err = await refusal(sql);
      expect([ErrorCode.QueryReadOnly, ErrorCode.QueryFailed], `${sql}: ${err.message}`).toContain(err.code);
      expect(err.message, sql).not.toMatch(/root:|PATH=|HOME=/);
    }
    expect(existsSync(written)).toBe(false);
    expect((await sink.query('SELECT count() AS n FROM detections')).rows).toEqual([{ n: 1 }]);
  });

  it('says why in words: the output file, the function, the database', async () => {
    expect((await refusal(`SELECT 1 INTO OUTFILE '${written}'`)).message).toContain('INTO OUTFILE writes a file');
    expect((await refusal("SELECT file('/etc/passwd')")).message).toContain('file() reads files');
    expect((await refusal('SELECT * FROM system.users')).message).toContain('system.users is outside the results database');
    expect((await refusal("show settings like 'max%'")).message).toContain("SHOW SETTINGS reads the server's own tables");
    expect((await refusal('SELECT 1; SELECT 2')).message).toMatch(/Multi-statements are not allowed/);
    // The answer's format is the request's: a FORMAT in the statement would not parse as JSON.
    expect((await refusal('SELECT 1 FORMAT CSV')).message).toContain("FORMAT CSV in the statement: the answer's format is the request's");
    for (const sql of ['EXPLAIN SELECT 1 FORMAT Native', 'DESCRIBE detections FORMAT Native', 'SHOW TABLES FORMAT Native', 'EXISTS detections FORMAT Native', 'EXPLAIN AST SELECT 1 FORMAT Native']) {
      expect((await refusal(sql)).message, sql).toContain('FORMAT Native in the statement');
    }
    expect((await refusal("EXPLAIN TABLE OVERRIDE mysql('127.0.0.1:9', 'db', 't', 'u', 'p') PARTITION BY x")).message).toContain('EXPLAIN TABLE OVERRIDE names a table elsewhere');
    for (const sql of ['SELECT hostName()', 'SELECT fullHostName()', 'SELECT displayName()', 'SELECT getOSKernelVersion()', 'SELECT filesystemAvailable()']) {
      expect((await refusal(sql)).message, sql).toContain("() reads files, dictionaries or the machine's own settings, outside the results");
    }
  });

  it('still answers what reads the results: SELECT with joins, unions and subqueries, SHOW, DESCRIBE, EXPLAIN, generated rows', async () => {
    for (const sql of [
      'SELECT class, count() AS n FROM detections GROUP BY class',
      'SELECT a.class FROM detections AS a JOIN detections AS b USING (row_id)',
      'SELECT 1 AS x UNION ALL SELECT 2',
      'WITH (SELECT max(score) FROM detections) AS best SELECT best',
      "SELECT 'it''s a \\\\ backslash' AS s",
      'SHOW TABLES',
      "show full tables like 'det%'",
      'SHOW DATABASES',
      'DESCRIBE TABLE detections',
      'SHOW CREATE TABLE detections',
      'EXISTS TABLE detections',
      'EXPLAIN SELECT * FROM detections',
      'SELECT number FROM numbers(3)',
      'SELECT 1;',
    ]) {
      await expect(sink.query(sql), sql).resolves.toHaveProperty('rows');
    }
    expect((await sink.query("SELECT 'it''s a \\\\ backslash' AS s")).rows).toEqual([{ s: "it's a \\ backslash" }]);
  });

  it('stops a query at its limits: rows (also without FROM), answer size, memory, time', async () => {
    expect((await refusal('SELECT arrayJoin(range(20000)) AS n')).message).toMatch(/20000 rows, over the limit of 10000/);
    expect((await refusal('SELECT number FROM numbers(20000)')).message).toMatch(/limit for result exceeded/i);
    // The 480 MB answer that once took the server to 4.6 GB.
    expect((await refusal("SELECT repeat('x', 1000000) AS s FROM numbers(480)")).message).toMatch(/over the limit of 8\.0 MB|memory limit/i);
    expect((await refusal('SELECT length(groupArray(number)) FROM numbers(300000000)')).message).toMatch(/memory limit/i);
    expect((await refusal('SELECT count() FROM numbers(100000) AS a, numbers(100000) AS b')).message).toMatch(/timeout exceeded/i);
  });

  it('runs queries in parallel and apart: a slow one holds no fast one back, failing ones spoil no others', async () => {
    const started = Date.now();
    const slow = sink.query('SELECT sleepEachRow(0.5) AS s FROM numbers(3)');
    const fastTimes = await Promise.all(Array.from({ length: 10 }, async () => {
      await sink.query('SELECT count() AS n FROM detections');
      return Date.now() - started;
    }));
    await slow;
    const slowMs = Date.now() - started;
    expect(slowMs).toBeGreaterThanOrEqual(1400);
    expect(Math.max(...fastTimes)).toBeLessThan(slowMs - 700);

    // 80 at once, 28 of them failing in different ways: every good one gets its own right answer.
    const answers = await Promise.allSettled(Array.from({ length: 80 }, (_, i) => {
      if (i % 20 < 7) return sink.query(['SELECT * FROM nowhere', 'SELECT file(1)', 'SELEC 1', "SELECT throwIf(1, 'boom')", 'SELECT 1; SELECT 2', 'SELECT 1 SETTINGS max_threads = 1', 'DROP TABLE detections'][i % 7]!);
      return sink.query(`SELECT ${i} AS i, count() AS n FROM detections`);
    }));
    answers.forEach((answer, i) => {
      if (i % 20 < 7) expect(answer.status, `query ${i}`).toBe('rejected');
      else expect(answer.status === 'fulfilled' ? answer.value.rows : answer.reason, `query ${i}`).toEqual([{ i, n: 1 }]);
    });
  });

  it('through `panoptes query`: INTO OUTFILE and file() exit non-zero, write nothing and print no file', async () => {
    // Results of its own: this process holds the others open, and chDB opens a folder in one process at a time.
    const dataDir = join(dir, 'cli');
    mkdirSync(join(dataDir, 'clickhouse'), { recursive: true });
    const run = (sql: string) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', join(projectRoot(), 'cli/main.ts'), 'query', sql, '--data-dir', dataDir], { cwd: projectRoot() }).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
      );
    // One after the other: chDB opens a results folder in one process at a time.
    const outfile = await run(`SELECT 'x' INTO OUTFILE '${written}' TRUNCATE FORMAT TSVRaw`);
    const environ = await run("SELECT file('/proc/self/environ')");
    expect(outfile.code).toBe(1);
    expect(outfile.stderr).toContain('INTO OUTFILE writes a file');
    expect(environ.code).toBe(1);
    expect(environ.stderr).not.toContain('PATH=');
    expect(existsSync(written)).toBe(false);
  });
});

describe.skipIf(serverSkipReason('clickhouse') !== undefined)('hostile SQL on a ClickHouse server (read-only user settings)', () => {
  it('refuses writes, output files, file() outside user_files and the table functions', async () => {
    const server = createClickHouseSink({ url: serverAddress('clickhouse') ?? '', readOnly: true, logger: silentLogger() });
    try {
      for (const sql of [`SELECT 'x' INTO OUTFILE '${written}'`, "SELECT file('/etc/passwd')", "SELECT * FROM url('http://127.0.0.1:9/', CSV, 'a String')", "SELECT * FROM file('/etc/passwd', 'CSV', 'a String')", 'DROP TABLE IF EXISTS x', 'SELECT 1 SETTINGS readonly = 0']) {
        await expect(server.query(sql), sql).rejects.toBeInstanceOf(PanoptesError);
      }
      expect(existsSync(written)).toBe(false);
    } finally {
      await server.close();
    }
  });
});
