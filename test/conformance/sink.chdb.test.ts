import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../core/index.js';
import { createChdbSink } from '../../sinks/index.js';
import { describeSinkConformance } from './sink.suite.js';

const path = mkdtempSync(join(tmpdir(), 'panoptes-sink-chdb-'));

describeSinkConformance('chDB', {
  open: async (readOnly, limits) => createChdbSink({ path, readOnly, logger: silentLogger(), ...(limits ? { limits } : {}) }),
  cleanup: async () => rmSync(path, { recursive: true, force: true }),
});
