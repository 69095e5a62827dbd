import { ErrorCode, PanoptesError, type Logger, type TableSpec } from '../core/index.js';
import { columnsSql, createTableSql, createViewSql, missingColumns, OPERATOR_TABLES, quoteIdentifier, rawName, retentionIn, ttlExpression, type SqlDialect } from './schema.js';

/** What `ensureSchema` needs of a ClickHouse connection. */
export interface SqlRunner {
  command(sql: string): Promise<void>;
  rows(sql: string): Promise<Record<string, unknown>[]>;
}

export interface SchemaOptions {
  dialect: SqlDialect;
  /** Days rows are kept, counted from each table's time column; undefined keeps them. */
  retentionDays?: number | undefined;
  logger: Logger;
}

/**
 * Brings a results database to the schema this build writes, in place, and is safe to run at
 * every start and from several processes at once. A database written by an earlier version is
 * upgraded step by step, each step idempotent, so an upgrade cut short resumes where it stopped:
 * 1. a results table from before the views (queried directly) becomes the `_raw` table behind
 *    its view;
 * 2. missing tables are created; columns this build writes and a table lacks are added (a
 *    column with another type is an error naming the fix: converting data is the operator's
 *    call);
 * 3. retention follows `retentionDays` (TTL), where the server has TTL;
 * 4. each view is (re)created when its columns no longer match its table's;
 * 5. rows of the `texts` table of 0.1 move into `recognitions`.
 */
export async function ensureSchema(db: SqlRunner, tables: readonly TableSpec[], options: SchemaOptions): Promise<void> {
  const logger = options.logger.child({ module: 'sinks.schema' });
  const all = [...new Map([...OPERATOR_TABLES, ...tables].map((t) => [t.name, t])).values()];
  if (options.retentionDays !== undefined && !options.dialect.ttl) {
    logger.warn({ version: options.dialect.version }, `ClickHouse ${options.dialect.version} has no TTL: retentionDays is ignored and rows are kept; drop old partitions by hand`);
  }
  for (const table of all) await ensureTable(db, table, options, logger);
  if (all.some((t) => t.name === 'recognitions')) await foldTexts(db, logger);
}

async function engines(db: SqlRunner): Promise<Map<string, { engine: string; engineFull: string }>> {
  const rows = await db.rows('SELECT name, engine, engine_full FROM system.tables WHERE database = currentDatabase()');
  return new Map(rows.map((r) => [String(r.name), { engine: String(r.engine), engineFull: String(r.engine_full) }]));
}

async function ensureTable(db: SqlRunner, table: TableSpec, options: SchemaOptions, logger: Logger): Promise<void> {
  const raw = rawName(table.name);
  const before = await engines(db);
  const existing = before.get(table.name);
  if (existing && existing.engine !== 'View') {
    if (before.has(raw)) {
      throw new PanoptesError(ErrorCode.SinkSchemaMismatch, `both ${table.name} and ${raw} are tables; ${table.name} must be the view of ${raw}: move or drop one of them`, {
        details: { table: table.name },
      });
    }
    logger.info({ table: table.name }, `upgrading ${table.name}: its rows move to ${raw}, read through a deduplicating view named ${table.name}`);
    await db.command(`RENAME TABLE ${quoteIdentifier(table.name)} TO ${quoteIdentifier(raw)}`);
  }

  await db.command(createTableSql(table, options.dialect, options.retentionDays));
  const columns = await db.rows(columnsSql(raw));
  for (const column of missingColumns(table, columns, options.dialect)) {
    logger.info({ table: raw, column: column.name }, `adding column ${column.name} to ${raw}`);
    await db.command(`ALTER TABLE ${quoteIdentifier(raw)} ADD COLUMN ${quoteIdentifier(column.name)} ${column.type}`);
    columns.push(column);
  }

  const rawEngine = (await engines(db)).get(raw);
  if (options.dialect.ttl && rawEngine && retentionIn(rawEngine.engineFull) !== (table.timeColumn ? options.retentionDays : undefined)) {
    const ttl = ttlExpression(table, options.retentionDays);
    logger.info({ table: raw, retentionDays: options.retentionDays ?? null }, `setting the retention of ${raw}`);
    await db.command(`ALTER TABLE ${quoteIdentifier(raw)} ${ttl ? `MODIFY TTL ${ttl}` : 'REMOVE TTL'}`);
  }

  const describe = (columns: Record<string, unknown>[]): string => columns.map((c) => `${String(c.name)} ${String(c.type)}`).sort().join(', ');
  const viewColumns = await db.rows(columnsSql(table.name));
  if (viewColumns.length > 0 && describe(viewColumns) === describe(columns)) return;
  // A view fixes its columns when created: after a column is added, it is made again.
  if (viewColumns.length > 0) await db.command(`DROP TABLE IF EXISTS ${quoteIdentifier(table.name)}`);
  await db.command(createViewSql(table));
}

/** 0.1 kept recognized text in `texts`; it is `recognitions` with kind `text` now. */
async function foldTexts(db: SqlRunner, logger: Logger): Promise<void> {
  if ((await engines(db)).get('texts')?.engine !== 'ReplacingMergeTree') return;
  logger.info('upgrading texts: its rows move to recognitions (kind text)');
  // Row ids keep a repeated move (one cut short, then run again) from doubling a row.
  await db.command(
    'INSERT INTO recognitions_raw (row_id, app, source, frame_seq, frame_time, node, kind, name, value, number, score, object_id, x1, y1, x2, y2, inserted_at) ' +
      "SELECT row_id, app, source, frame_seq, frame_time, node, 'text', '', text, toFloat64OrZero(text), score, '', x1, y1, x2, y2, inserted_at FROM texts",
  );
  await db.command('DROP TABLE texts');
}
