import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { holderOf, runningResults, serveLocalQueries } from '../../cli/local-endpoint.js';
import { ErrorCode, PanoptesError, silentLogger } from '../../core/index.js';
import type { QueryResult, ResultSink } from '../../sinks/index.js';


/** A read-only store answering every query with `rows` rows, and refusing DROP as the real one does. */
function fakeReader(rows: number): ResultSink & { asked: string[] } {
  const asked: string[] = [];
  return {
    kind: 'chdb',
    asked,
    async query(sql): Promise<QueryResult> {
      asked.push(sql);
      if (/^DROP/i.test(sql)) throw new PanoptesError(ErrorCode.QueryReadOnly, 'queries are read-only: DROP is not a read');
      return { columns: [{ name: 'n', type: 'UInt64' }], rows: Array.from({ length: rows }, (_, n) => ({ n })) };
    },
    ensureTables: async () => {},
    insert: async () => {},
    close: async () => {},
  };
}

describe('queries through the process holding the embedded results', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'panoptes-local-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('answers on a socket only its owner can reach, with the same errors, and names itself while it runs', async () => {
    expect(await runningResults(dataDir)).toBeUndefined();
    const reader = fakeReader(3);
    const served = await serveLocalQueries({ dataDir, reader, savedQuery: () => 'SELECT 1', logger: silentLogger() });
    try {
      expect(statSync(join(dataDir, 'run')).mode & 0o777).toBe(0o700);
      // This process holds them; it is not "another" holder to itself.
      expect(await holderOf(dataDir)).toBeUndefined();
      const results = await runningResults(dataDir);
      expect(results).toBeDefined();
      expect(await results!.query('SELECT n FROM t')).toEqual({ columns: [{ name: 'n', type: 'UInt64' }], rows: [{ n: 0 }, { n: 1 }, { n: 2 }] });
      expect(reader.asked).toEqual(['SELECT n FROM t']);
      await expect(results!.query('DROP TABLE t')).rejects.toMatchObject({ code: ErrorCode.QueryReadOnly, message: 'queries are read-only: DROP is not a read' });
      // This command's own limit, tighter than the holder's, holds too.
      const strict = await runningResults(dataDir, { maxResultRows: 2 });
      await expect(strict!.query('SELECT n FROM t')).rejects.toThrow(/3 rows, over the limit of 2/);
      await expect(results!.insert({ name: 't', columns: [], orderBy: [] }, [])).rejects.toMatchObject({ code: ErrorCode.QueryReadOnly });
    } finally {
      await served.close();
    }
    expect(await runningResults(dataDir)).toBeUndefined();
    expect(await holderOf(dataDir)).toBeUndefined();
  });

  it('makes its folder its own, and replaces a link planted at the holder file instead of writing through it', async () => {
    const dir = join(dataDir, 'planted');
    mkdirSync(join(dir, 'run'), { recursive: true, mode: 0o777 });
    chmodSync(join(dir, 'run'), 0o777);
    const victim = join(dataDir, 'victim.txt');
    writeFileSync(victim, 'untouched');
    symlinkSync(victim, join(dir, 'run', 'holder.json'));
    const served = await serveLocalQueries({ dataDir: dir, reader: fakeReader(1), savedQuery: () => 'SELECT 1', logger: silentLogger() });
    try {
      expect(statSync(join(dir, 'run')).mode & 0o777).toBe(0o700);
      expect(readFileSync(victim, 'utf8')).toBe('untouched');
      expect(lstatSync(join(dir, 'run', 'holder.json')).isSymbolicLink()).toBe(false);
    } finally {
      await served.close();
    }
    // A link where the folder should be is refused.
    const linked = join(dataDir, 'linked');
    mkdirSync(linked);
    symlinkSync(tmpdir(), join(linked, 'run'));
    await expect(serveLocalQueries({ dataDir: linked, reader: fakeReader(1), savedQuery: () => 'SELECT 1', logger: silentLogger() })).rejects.toThrow(/is not a folder of this user's/);
  });

  it('takes a socket file left by a process that is gone for no instance, and a new holder replaces it', async () => {
    const dir = join(dataDir, 'stale');
    mkdirSync(join(dir, 'run'), { recursive: true });
    writeFileSync(join(dir, 'run', 'panoptes.sock'), '');
    writeFileSync(join(dir, 'run', 'holder.json'), JSON.stringify({ pid: 2 ** 22 + 1, command: 'panoptes run gone.yaml', startedAt: '2026-01-01T00:00:00Z' }));
    expect(await runningResults(dir)).toBeUndefined();
    expect(await holderOf(dir)).toBeUndefined();
    // A running process (this one's parent) that says it holds them but does not answer on its socket: a stale file, not a holder.
    writeFileSync(join(dir, 'run', 'holder.json'), JSON.stringify({ pid: process.ppid, command: 'panoptes run old.yaml', startedAt: '2026-01-01T00:00:00Z', socket: true }));
    expect(await holderOf(dir)).toBeUndefined();
    // One that made no socket (a path too long for one) is named while it runs.
    writeFileSync(join(dir, 'run', 'holder.json'), JSON.stringify({ pid: process.ppid, command: 'panoptes run long.yaml', startedAt: '2026-01-01T00:00:00Z', socket: false }));
    expect(await holderOf(dir)).toBe(`process ${process.ppid} (panoptes run long.yaml, since 2026-01-01T00:00:00Z)`);
    const served = await serveLocalQueries({ dataDir: dir, reader: fakeReader(1), savedQuery: () => 'SELECT 1', logger: silentLogger() });
    try {
      expect((await (await runningResults(dir))!.query('SELECT 1')).rows).toEqual([{ n: 0 }]);
    } finally {
      await served.close();
    }
  });
});
