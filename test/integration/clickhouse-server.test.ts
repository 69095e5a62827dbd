import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { clickhouseUnavailableReason, startClickHouseServer, type ClickHouseServer } from '../../tools/clickhouse/server.js';
import { canConnect, processAlive } from '../../tools/processes.js';

const unavailable = clickhouseUnavailableReason();
if (unavailable) console.warn(`ClickHouse server test skipped: ${unavailable}`);

/** Runs one statement over HTTP (POST, so writes are allowed) and returns the answer. */
async function query(url: string, sql: string): Promise<string> {
  const response = await fetch(url, { method: 'POST', body: sql });
  const body = await response.text();
  if (!response.ok) throw new Error(`ClickHouse answered ${response.status}: ${body}`);
  return body;
}

describe.skipIf(unavailable)('ClickHouse server for tests', () => {
  it('starts, stops, and restarts on the same data with its rows', async () => {
    let server: ClickHouseServer = await startClickHouseServer();
    const { dataDir, httpPort, tcpPort } = server;
    try {
      expect(server.url).toBe(`http://127.0.0.1:${httpPort}`);
      expect(server.version).toMatch(/^\d+\.\d+/);
      expect((await query(server.url, 'SELECT version()')).trim()).toBe(server.version);
      expect(await canConnect(tcpPort)).toBe(true);
      await query(server.url, 'CREATE TABLE seen (id UInt32, label String) ENGINE = MergeTree ORDER BY id');
      await query(server.url, "INSERT INTO seen VALUES (1, 'person')");
      await server.stop();
      expect(processAlive(server.pid)).toBe(false);
      expect(await canConnect(httpPort)).toBe(false);

      server = await startClickHouseServer({ dataDir, httpPort, tcpPort });
      expect(server.url).toBe(`http://127.0.0.1:${httpPort}`);
      expect(await query(server.url, 'SELECT id, label FROM seen FORMAT TSV')).toBe('1\tperson\n');
      await server.stop();
      expect(await canConnect(httpPort)).toBe(false);
    } finally {
      await server.kill();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
