export {
  clickhouseUnavailableReason,
  startClickHouseServer,
  type ClickHouseServer,
  type ClickHouseServerOptions,
} from './server.js';
