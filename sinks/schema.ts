import { ErrorCode, PanoptesError, type ColumnSpec, type ColumnType, type FieldValue, type ResultRow, type TableSpec } from '../core/index.js';

/**
 * Table DDL from the apps' TableSpecs. Every table carries the row's identity columns; the
 * engine is ReplacingMergeTree keyed by `row_id`, so a row written twice (a replayed message,
 * a retried insert) collapses to one (`SELECT ... FINAL` reads it deduplicated at once).
 */

export const IDENTITY_COLUMNS: readonly ColumnSpec[] = [
  { name: 'row_id', type: 'String' },
  { name: 'app', type: 'String' },
  { name: 'source', type: 'String' },
];

/** Where drops land; written by the sink itself, not by an app. */
export const DROPS_TABLE: TableSpec = {
  name: 'drops',
  columns: [
    { name: 'what', type: 'String' },
    { name: 'stage', type: 'String' },
    { name: 'reason', type: 'String' },
    { name: 'frame_seq', type: 'Int64' },
    { name: 'at', type: 'DateTime64(3)' },
    { name: 'detail', type: 'String' },
  ],
  // Not `at`: the sort key is what deduplicates, and a drop seen twice may carry two times.
  orderBy: ['source', 'stage'],
};

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a valid identifier: ${name}`);
  return `\`${name}\``;
}

/**
 * What the ClickHouse at hand accepts. chDB and current servers have DateTime64 (since 20.1);
 * Debian's clickhouse-server 18.16 has only DateTime, to the second, and fills columns a
 * JSONEachRow insert leaves out with zeros instead of their defaults.
 */
export interface SqlDialect {
  dateTime64: boolean;
}
export const CURRENT_DIALECT: SqlDialect = { dateTime64: true };

/** The dialect of a server by its `version()`, e.g. "18.16.1" or "24.8.4.13". */
export function dialectOf(version: string): SqlDialect {
  const major = Number(version.split('.')[0]);
  return { dateTime64: !(major < 20) };
}

const columnType = (type: ColumnType, dialect: SqlDialect): string => (type === 'DateTime64(3)' && !dialect.dateTime64 ? 'DateTime' : type);

export function createTableSql(table: TableSpec, dialect: SqlDialect = CURRENT_DIALECT): string {
  const columns = [...IDENTITY_COLUMNS, ...table.columns]
    .map((c) => `${quoteIdentifier(c.name)} ${columnType(c.type, dialect)}`)
    .concat(dialect.dateTime64 ? '`inserted_at` DateTime64(3) DEFAULT now64(3)' : '`inserted_at` DateTime DEFAULT now()');
  const orderBy = [...table.orderBy, 'row_id'].map(quoteIdentifier).join(', ');
  return `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table.name)} (\n  ${columns.join(',\n  ')}\n) ENGINE = ReplacingMergeTree(inserted_at) ORDER BY (${orderBy})`;
}

/** SQL listing a table's columns, for `checkColumns`; both chDB and 18.16 servers answer it. */
export const columnsSql = (table: TableSpec): string =>
  `SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = '${table.name.replace(/'/g, '')}'`;

/**
 * Throws `SinkSchemaMismatch` when a table that already existed lacks a column this build
 * writes, or has it with another type, naming each and the statement that would fix it. Columns
 * the table has beyond those are left alone.
 */
export function checkColumns(table: TableSpec, actual: readonly { name: unknown; type: unknown }[], dialect: SqlDialect = CURRENT_DIALECT): void {
  const found = new Map(actual.map((c) => [String(c.name), String(c.type)]));
  const expected = [...IDENTITY_COLUMNS, ...table.columns].map((c) => ({ name: c.name, type: columnType(c.type, dialect) }));
  expected.push({ name: 'inserted_at', type: dialect.dateTime64 ? 'DateTime64(3)' : 'DateTime' });
  const problems = expected.flatMap(({ name, type }) => {
    const has = found.get(name);
    if (has === undefined) return [`column ${name} is missing (ALTER TABLE ${table.name} ADD COLUMN ${name} ${type})`];
    if (has !== type) return [`column ${name} is ${has}, expected ${type} (ALTER TABLE ${table.name} MODIFY COLUMN ${name} ${type})`];
    return [];
  });
  if (problems.length === 0) return;
  throw new PanoptesError(
    ErrorCode.SinkSchemaMismatch,
    `table ${table.name} exists with another schema: ${problems.join('; ')}; or store results in a new database or data directory`,
    { details: { table: table.name, problems } },
  );
}

/** Rows as JSONEachRow objects. Times are ms since epoch; a DateTime column takes seconds. */
export function toInsertRows(table: TableSpec, rows: readonly ResultRow[], dialect: SqlDialect = CURRENT_DIALECT): Record<string, unknown>[] {
  if (dialect.dateTime64) return rows.map((row) => ({ row_id: row.rowId, app: row.app, source: row.source, ...row.fields }));
  const times = table.columns.filter((c) => c.type === 'DateTime64(3)').map((c) => c.name);
  const insertedAt = Math.floor(Date.now() / 1000);
  return rows.map((row) => {
    const fields: Record<string, unknown> = { ...row.fields };
    for (const name of times) if (typeof fields[name] === 'number') fields[name] = Math.floor(fields[name] / 1000);
    return { row_id: row.rowId, app: row.app, source: row.source, ...fields, inserted_at: insertedAt };
  });
}

/** One JSON object per row, in JSONEachRow form. */
export function toJsonEachRow(table: TableSpec, rows: readonly ResultRow[]): string {
  return toInsertRows(table, rows)
    .map((row) => JSON.stringify(row))
    .join('\n');
}

const INTEGER_RANGES: Partial<Record<ColumnType, [number, number]>> = {
  UInt8: [0, 255],
  UInt32: [0, 2 ** 32 - 1],
  UInt64: [0, Number.MAX_SAFE_INTEGER],
  Int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  'DateTime64(3)': [0, Number.MAX_SAFE_INTEGER],
};
const FLOAT32_MAX = 3.4028234663852886e38;

/** Why a value can't go into a column of this type, or undefined when it can. */
function valueProblem(type: ColumnType, value: FieldValue): string | undefined {
  if (value === null) return 'is null; columns are not nullable';
  if (type === 'String') return typeof value === 'string' ? undefined : `needs a string, got ${typeof value} ${JSON.stringify(value)}`;
  if (type === 'UInt8' && typeof value === 'boolean') return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) return `needs a finite number, got ${JSON.stringify(value)}`;
  const range = INTEGER_RANGES[type];
  if (range) {
    if (!Number.isInteger(value)) return `needs an integer, got ${value}`;
    if (value < range[0] || value > range[1]) return `needs ${range[0]}..${range[1]}, got ${value}`;
  }
  if (type === 'Float32' && Math.abs(value) > FLOAT32_MAX) return `is out of Float32 range: ${value}`;
  return undefined;
}

/** Why a row doesn't fit its table, or undefined when it does. Checked before insert: ClickHouse would refuse the whole batch, or wrap the value silently. */
export function rowProblem(table: TableSpec, row: ResultRow): string | undefined {
  const types = new Map(table.columns.map((c) => [c.name, c.type]));
  for (const [name, value] of Object.entries(row.fields)) {
    const type = types.get(name);
    if (!type) return `unknown column "${name}" for table ${table.name}`;
    const problem = valueProblem(type, value);
    if (problem) return `column "${name}" (${type}) ${problem}`;
  }
  return undefined;
}
