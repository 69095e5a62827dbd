export { createClickHouseSink, type ClickHouseSinkOptions } from './clickhouse-sink.js';
