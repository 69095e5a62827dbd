/** The ResultSink suite against a real ClickHouse server (the one test/servers-setup.ts started). */
import { randomUUID } from 'node:crypto';
import { describe } from 'vitest';
import { silentLogger } from '../../core/index.js';
import { createClickHouseSink } from '../../sinks/index.js';
import { serverAddress, serverSkipReason } from '../servers.js';
import { describeSinkConformance } from './sink.suite.js';

const database = `panoptes_test_${randomUUID().slice(0, 8)}`;

/** Statements outside the port (a database of the suite's own) go straight to the HTTP interface. */
async function admin(url: string, sql: string): Promise<string> {
  const response = await fetch(url, { method: 'POST', body: sql });
  if (!response.ok) throw new Error(`${sql}: ${await response.text()}`);
  return response.text();
}

describe.skipIf(serverSkipReason('clickhouse') !== undefined)('ClickHouse server', () => {
  const url = serverAddress('clickhouse') ?? '';
  describeSinkConformance('ClickHouse server', {
    open: async (options = {}) => {
      await admin(url, `CREATE DATABASE IF NOT EXISTS ${database}`);
      return createClickHouseSink({ url, database, logger: silentLogger(), ...options });
    },
    execute: async (sql) => void (await admin(`${url}/?database=${database}`, sql)),
    rows: async (sql) => {
      const lines = (await admin(`${url}/?database=${database}`, `${sql} FORMAT JSONEachRow`)).split('\n').filter(Boolean);
      return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    cleanup: async () => void (await admin(url, `DROP DATABASE IF EXISTS ${database}`)),
  });
});
