import { Session, type ChdbResult } from 'chdb';
import { describeError, ensureDir, ErrorCode, PanoptesError, type Logger, type ResultRow, type TableSpec } from '../../core/index.js';
import { ensureSchema } from '../migrate.js';
import { CURRENT_DIALECT, rawName, toJsonEachRow } from '../schema.js';
import { checkAnswer, limitSettings, queryFailure, type QueryLimits, type QueryResult, type ResultSink } from '../types.js';
import { parseAstDump, refusal } from './statement-check.js';

export interface ChdbSinkOptions {
  /** Folder for the database files. */
  path: string;
  /** Open for reading only: the engine itself refuses writes and setting changes. */
  readOnly?: boolean;
  /** Limits of each query. */
  limits?: QueryLimits;
  /** Days rows are kept; undefined keeps them. */
  retentionDays?: number | undefined;
  logger: Logger;
}

/** The database the embedded results live in. */
const RESULTS_DATABASE = 'default';
/** Rows the engine answers at least, whatever the row limit: the statement's checks need them. */
const CHECK_ROWS = 10_000;

/**
 * Embedded ClickHouse. chDB holds one data path per process, on which each `Session` is a
 * connection of its own, with its own settings, running in parallel with the others. Queries
 * therefore each get a fresh read-only session: one query's failure, slowness or leftover
 * output never reaches another, and users read while the sink writes.
 */
export function createChdbSink(options: ChdbSinkOptions): ResultSink {
  ensureDir(options.path, 'the results folder');
  const jsonArgs = ['--output_format_json_quote_64bit_integers=0'];
  // The limits go first: once readonly=1 is set, no setting can change. The statement's checks run
  // under them too, and their answers (a parse tree, a line a node) must fit whatever the row
  // limit: the engine's is at least CHECK_ROWS, and the answer is held to the limit itself after.
  const engineLimits = { ...options.limits, maxResultRows: Math.max(options.limits?.maxResultRows ?? 0, CHECK_ROWS) };
  const readerArgs = [...jsonArgs, ...Object.entries(limitSettings(engineLimits)).map(([name, value]) => `--${name}=${value}`), '--readonly=1'];
  const session = open(options.path, options.readOnly ? readerArgs : jsonArgs);
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
      const reader = open(options.path, readerArgs);
      try {
        const statement = await checkedStatement(reader, sql);
        const answer = await run(reader, statement, 'JSON');
        checkAnswer({ rows: 0, bytes: answer.bytes().length }, options.limits);
        const text = answer.text().trim();
        if (text === '') return { columns: [], rows: [] };
        const parsed = JSON.parse(text) as { meta: { name: string; type: string }[]; data: Record<string, unknown>[] };
        checkAnswer({ rows: parsed.data.length }, options.limits);
        return { columns: parsed.meta, rows: parsed.data };
      } finally {
        reader.close();
      }
    },
    async close() {
      session.close();
    },
  };
}

function open(path: string, args: string[]): Session {
  try {
    return new Session(path, { connectionArgs: args });
  } catch (err) {
    // chDB opens a data folder in one process at a time; the lock is the usual reason.
    throw new PanoptesError(
      ErrorCode.SinkUnavailable,
      `cannot open the results in ${path} (${describeError(err)}); is another process using them?`,
      { cause: err, retriable: true, details: { path } },
    );
  }
}

/**
 * The one statement in `sql`, as ClickHouse formats it, once its parse shows that it only reads
 * the results. What runs is this formatted text, so what was checked is what runs.
 */
async function checkedStatement(session: Session, sql: string): Promise<string> {
  const literal = `'${sql.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const statement = (await run(session, `SELECT formatQuery(${literal})`, 'TSVRaw')).text().replace(/\n$/, '');
  const ast = parseAstDump((await run(session, `EXPLAIN AST ${statement}`, 'TSVRaw')).text().split('\n'));
  const why = refusal(ast, RESULTS_DATABASE, statement);
  if (why) throw new PanoptesError(ErrorCode.QueryReadOnly, `queries are read-only: ${why}`);
  return statement;
}

async function run(session: Session, sql: string, format: 'JSON' | 'TSVRaw'): Promise<ChdbResult> {
  try {
    return await session.queryAsync(sql, { format });
  } catch (err) {
    // A syntax error comes back from the formatQuery() around the user's text: say it without it.
    const message = describeError(err).replace(/: In scope SELECT formatQuery\([\s\S]*$/, '');
    const readOnly = /READONLY|readonly mode/i.test(message);
    throw new PanoptesError(
      readOnly ? ErrorCode.QueryReadOnly : ErrorCode.QueryFailed,
      readOnly ? `queries are read-only: ${message}` : queryFailure(message),
      { cause: err },
    );
  }
}
