export type * from './types.js';
export { checkAnswer, limitSettings } from './types.js';
export { createChdbSink, type ChdbSinkOptions } from './chdb/index.js';
export { createClickHouseSink, type ClickHouseSinkOptions } from './clickhouse/index.js';
export { createSinkWorker, type SinkStatus, type SinkWorker, type SinkWorkerOptions } from './sink-worker.js';
export { APP_STATS_TABLE, createTableSql, DROPS_TABLE, OPERATOR_TABLES, PLANS_TABLE, rawName, SESSION_STATS_TABLE } from './schema.js';
