import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { describeError, ErrorCode, PanoptesError, redactUrl, type Logger, type ResultRow, type TableSpec } from '../../core/index.js';
import { ensureSchema } from '../migrate.js';
import { dialectOf, quoteIdentifier, rawName, toInsertRows, type SqlDialect } from '../schema.js';
import { checkAnswer, limitSettings, queryFailure, type QueryLimits, type QueryResult, type ResultSink } from '../types.js';

export interface ClickHouseSinkOptions {
  /** The server's HTTP interface, e.g. http://127.0.0.1:8123. */
  url: string;
  database?: string;
  username?: string;
  password?: string;
  /** Every request runs with `readonly=1`: the server itself refuses writes, settings and table functions. */
  readOnly?: boolean;
  /** Limits of each query on a read-only sink. */
  limits?: QueryLimits;
  /** @defaultValue 30000 */
  requestTimeoutMs?: number;
  /** Days rows are kept; undefined keeps them. Needs ClickHouse 20.1 or newer (TTL). */
  retentionDays?: number | undefined;
  logger: Logger;
}

/** ClickHouse error codes that mean "not allowed in read-only mode". */
const READONLY = /Code: 164\b|readonly mode/i;

/**
 * A ClickHouse server through its HTTP interface (@clickhouse/client). The SQL dialect follows
 * the server's version (see `SqlDialect`), found on first use.
 */
export function createClickHouseSink(options: ClickHouseSinkOptions): ResultSink {
  const logger = options.logger.child({ module: 'sinks.clickhouse' });
  const client: ClickHouseClient = createClient({
    url: options.url,
    ...(options.database ? { database: options.database } : {}),
    ...(options.username ? { username: options.username } : {}),
    ...(options.password ? { password: options.password } : {}),
    request_timeout: options.requestTimeoutMs ?? 30_000,
    // Every failure is thrown to the caller, who logs what it means; the client would log it twice.
    log: { level: ClickHouseLogLevel.OFF },
    // On every request's URL: the query text cannot lift them (SETTINGS and SET are refused).
    clickhouse_settings: options.readOnly ? { ...limitSettings(options.limits), readonly: '1' } : {},
  });
  let dialect: Promise<SqlDialect> | undefined;

  /** The server is not reachable, or answered with an error. */
  const unavailable = (err: unknown): boolean => /ECONNREFUSED|ECONNRESET|socket hang up|Timeout/i.test(describeError(err));

  function serverDialect(): Promise<SqlDialect> {
    dialect ??= (async () => {
      const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' });
      const [row] = await result.json<{ version: string }>();
      return dialectOf(row?.version ?? '');
    })().catch((err: unknown) => {
      dialect = undefined;
      throw new PanoptesError(ErrorCode.SinkUnavailable, `cannot reach ClickHouse at ${redactUrl(options.url)}: ${describeError(err)}`, {
        cause: err,
        retriable: true,
        details: { url: redactUrl(options.url) },
      });
    });
    return dialect;
  }

  return {
    kind: 'server',

    async ensureTables(tables: readonly TableSpec[]) {
      if (options.database && options.database !== 'default') await createDatabase(options);
      const runner = {
        command: async (sql: string) => void (await client.command({ query: sql })),
        rows: async (sql: string) => (await client.query({ query: sql, format: 'JSONEachRow' })).json<Record<string, unknown>>(),
      };
      await ensureSchema(runner, tables, { dialect: await serverDialect(), retentionDays: options.retentionDays, logger });
    },

    async insert(table: TableSpec, rows: readonly ResultRow[]) {
      if (rows.length === 0) return;
      try {
        await client.insert({ table: rawName(table.name), values: toInsertRows(table, rows, await serverDialect()), format: 'JSONEachRow' });
      } catch (err) {
        logger.warn({ err, table: table.name, rows: rows.length }, 'insert failed');
        throw new PanoptesError(ErrorCode.SinkInsert, `insert of ${rows.length} rows into ${table.name} failed: ${describeError(err)}`, {
          cause: err,
          retriable: !options.readOnly || unavailable(err),
          details: { table: table.name },
        });
      }
    },

    async query(sql: string): Promise<QueryResult> {
      let parsed;
      try {
        const result = await client.query({ query: sql, format: 'JSON', clickhouse_settings: { output_format_json_quote_64bit_integers: 0 } });
        parsed = await result.json<Record<string, unknown>>();
      } catch (err) {
        const message = describeError(err);
        const readOnly = READONLY.test(message);
            throw new PanoptesError(
          readOnly ? ErrorCode.QueryReadOnly : ErrorCode.QueryFailed,
          readOnly ? `queries are read-only: ${message}` : queryFailure(message),
          { cause: err },
        );
      }
      checkAnswer({ rows: parsed.data.length }, options.limits);
      return { columns: parsed.meta ?? [], rows: parsed.data };
    },

    async close() {
      await client.close();
    },
  };
}

/** Requests name their database, so it is created through a client that names none. */
async function createDatabase(options: ClickHouseSinkOptions): Promise<void> {
  const admin = createClient({
    url: options.url,
    ...(options.username ? { username: options.username } : {}),
    ...(options.password ? { password: options.password } : {}),
  });
  try {
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(options.database ?? 'default')}` });
  } catch (err) {
    throw new PanoptesError(ErrorCode.SinkUnavailable, `cannot create database ${options.database} on ${redactUrl(options.url)}: ${describeError(err)}`, {
      cause: err,
      retriable: true,
      details: { url: redactUrl(options.url) },
    });
  } finally {
    await admin.close();
  }
}
