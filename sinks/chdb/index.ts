export { createChdbSink, type ChdbSinkOptions } from './chdb-sink.js';
