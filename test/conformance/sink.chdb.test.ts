import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'chdb';
import { silentLogger } from '../../core/index.js';
import { createChdbSink } from '../../sinks/index.js';
import { describeSinkConformance } from './sink.suite.js';

const path = mkdtempSync(join(tmpdir(), 'panoptes-sink-chdb-'));

describeSinkConformance('chDB', {
  open: async (options = {}) => createChdbSink({ path, logger: silentLogger(), ...options }),
  execute: async (sql) => {
    const session = new Session(path);
    try {
      await session.queryAsync(sql);
    } finally {
      session.close();
    }
  },
  rows: async (sql) => {
    const session = new Session(path);
    try {
      return (JSON.parse((await session.queryAsync(sql, { format: 'JSON' })).text()) as { data: Record<string, unknown>[] }).data;
    } finally {
      session.close();
    }
  },
  cleanup: async () => rmSync(path, { recursive: true, force: true }),
});
