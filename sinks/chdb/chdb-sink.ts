import { mkdirSync } from 'node:fs';
import { Session } from 'chdb';
import { describeError, ErrorCode, PanoptesError, type Logger, type ResultRow, type TableSpec } from '../../core/index.js';
import { ensureSchema } from '../migrate.js';
import { CURRENT_DIALECT, rawName, toJsonEachRow } from '../schema.js';
import { limitSettings, type QueryLimits, type QueryResult, type ResultSink } from '../types.js';

export interface ChdbSinkOptions {
  /** Folder for the database files. */
  path: string;
  /** Open for reading only: the engine itself refuses writes and setting changes. */
  readOnly?: boolean;
  /** Limits of each query on a read-only sink. */
  limits?: QueryLimits;
  /** Days rows are kept; undefined keeps them. */
  retentionDays?: number | undefined;
  logger: Logger;
}

/** Embedded ClickHouse. chDB allows one open session per data path in a process. */
export function createChdbSink(options: ChdbSinkOptions): ResultSink {
  mkdirSync(options.path, { recursive: true });
  const args = ['--output_format_json_quote_64bit_integers=0'];
  // The limits go first: once readonly=1 is set, no setting can change.
  if (options.readOnly) args.push(...Object.entries(limitSettings(options.limits)).map(([name, value]) => `--${name}=${value}`), '--readonly=1');
  let session: Session;
  try {
    session = new Session(options.path, { connectionArgs: args });
  } catch (err) {
    // chDB opens a data folder in one process at a time; the lock is the usual reason.
    throw new PanoptesError(
      ErrorCode.SinkUnavailable,
      `cannot open the results in ${options.path} (${describeError(err)}); is a run or replay using them? Query them when it ends`,
      { cause: err, retriable: true, details: { path: options.path } },
    );
  }
  const logger = options.logger.child({ module: 'sinks.chdb' });

  return {
    kind: 'chdb',
    async ensureTables(tables) {
      const runner = {
        command: async (sql: string) => void (await session.queryAsync(sql)),
        rows: async (sql: string) => (JSON.parse((await session.queryAsync(sql, { format: 'JSON' })).text()) as { data: Record<string, unknown>[] }).data,
      };
      await ensureSchema(runner, tables, { dialect: CURRENT_DIALECT, retentionDays: options.retentionDays, logger });
    },
    async insert(table: TableSpec, rows: readonly ResultRow[]) {
      if (rows.length === 0) return;
      try {
        await session.insert({ table: rawName(table.name), values: Buffer.from(toJsonEachRow(table, rows)), format: 'JSONEachRow' });
      } catch (err) {
        logger.warn({ err, table: table.name, rows: rows.length }, 'insert failed');
        throw new PanoptesError(ErrorCode.SinkInsert, `insert of ${rows.length} rows into ${table.name} failed: ${describeError(err)}`, {
          cause: err,
          retriable: !options.readOnly,
          details: { table: table.name },
        });
      }
    },
    async query(sql: string): Promise<QueryResult> {
      try {
        const result = await session.queryAsync(sql, { format: 'JSON' });
        const text = result.text();
        if (text.trim() === '') return { columns: [], rows: [] };
        const parsed = parseOne(text);
        return { columns: parsed.meta, rows: parsed.data };
      } catch (err) {
        // chDB runs `a; b` as two statements, and output of a statement before a failing one is
        // left in the session and handed to the next query: drain it so the next answer is its own.
        await session.queryAsync('SELECT 1', { format: 'JSON' }).catch(() => undefined);
        const readOnly = /READONLY|readonly mode/i.test(describeError(err));
        throw new PanoptesError(
          readOnly ? ErrorCode.QueryReadOnly : ErrorCode.QueryFailed,
          readOnly ? `queries are read-only: ${describeError(err)}` : `query failed: ${describeError(err)}`,
          { cause: err },
        );
      }
    },
    async close() {
      session.close();
    },
  };
}

/** One JSON result; several concatenated ones mean the text held several statements. */
function parseOne(text: string): { meta: { name: string; type: string }[]; data: Record<string, unknown>[] } {
  try {
    return JSON.parse(text) as { meta: { name: string; type: string }[]; data: Record<string, unknown>[] };
  } catch {
    throw new Error('one statement at a time: the answer held more than one result');
  }
}
