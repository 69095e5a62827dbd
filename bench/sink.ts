// `npm run bench -- sink`: detection rows inserted into chDB and into a ClickHouse server (one
// this starts itself from Debian's clickhouse-server, or PANOPTES_CLICKHOUSE_URL), in batches of
// 1k and of 100k rows, one after the other in the same run. Rows/s is rows over the time the
// inserts took, through the ResultSink port as the sink worker uses it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DETECTIONS } from '../apps/index.js';
import { createLogger, type ResultRow } from '../core/index.js';
import { createChdbSink, createClickHouseSink, type ResultSink } from '../sinks/index.js';
import { startClickHouseServer, type ClickHouseServer } from '../tools/clickhouse/index.js';

/** Rows inserted per batch size: enough batches to time, few enough to finish in seconds. */
const PLAN = [
  { batch: 1_000, batches: 50 },
  { batch: 100_000, batches: 3 },
];

export interface SinkFigures {
  rowsPerS1k: number;
  rowsPerS100k: number;
}

function rows(count: number, from: number): ResultRow[] {
  return Array.from({ length: count }, (_, i) => {
    const seq = from + i;
    return {
      app: 'traffic',
      table: 'detections',
      rowId: `traffic/cam-${seq % 16}/${seq}/detect/0`,
      source: `cam-${seq % 16}`,
      fields: { frame_seq: seq, frame_time: 1_700_000_000_000 + seq * 40, node: 'detect', class: seq % 3 ? 'car' : 'person', score: 0.5 + (seq % 50) / 100, x1: 10, y1: 20, x2: 110.5, y2: 220 },
    };
  });
}

async function measure(sink: ResultSink): Promise<SinkFigures> {
  await sink.ensureTables([DETECTIONS]);
  const rates: number[] = [];
  let next = 0;
  for (const { batch, batches } of PLAN) {
    const prepared = Array.from({ length: batches }, () => rows(batch, (next += batch)));
    await sink.insert(DETECTIONS, rows(batch, 1e9)); // warm-up at this size
    const started = performance.now();
    for (const batchRows of prepared) await sink.insert(DETECTIONS, batchRows);
    rates.push(round((batch * batches) / ((performance.now() - started) / 1000)));
  }
  return { rowsPerS1k: rates[0]!, rowsPerS100k: rates[1]! };
}

export async function sinkBench(): Promise<void> {
  const logger = createLogger({ level: 'warn' });
  const scratch = mkdtempSync(join(tmpdir(), 'panoptes-bench-sink-'));
  let server: ClickHouseServer | undefined;
  try {
    const url = process.env.PANOPTES_CLICKHOUSE_URL ?? (server = await startClickHouseServer({ dataDir: join(scratch, 'server') })).url;
    const chdbSink = createChdbSink({ path: join(scratch, 'chdb'), logger });
    const chdb = await measure(chdbSink);
    await chdbSink.close();
    console.log(`chDB: ${chdb.rowsPerS1k} rows/s in batches of 1k, ${chdb.rowsPerS100k} rows/s in batches of 100k`);

    const database = `panoptes_bench_${Date.now()}`;
    const serverSink = createClickHouseSink({ url, database, logger });
    const figures = await measure(serverSink);
    await serverSink.close();
    await fetch(url, { method: 'POST', body: `DROP DATABASE IF EXISTS ${database}` });
    console.log(`server (${url}${server ? `, ClickHouse ${server.version}` : ''}): ${figures.rowsPerS1k} rows/s in batches of 1k, ${figures.rowsPerS100k} rows/s in batches of 100k`);
    console.log(`rows inserted per batch size: ${PLAN.map((p) => `${p.batch * p.batches} in batches of ${p.batch}`).join(', ')}`);
    console.log(JSON.stringify({ chdb, server: figures }));
  } finally {
    await server?.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

const round = (n: number): number => Math.round(n);
