import type { ColumnSpec, ResultRow, TableSpec } from '../core/index.js';

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
  orderBy: ['source', 'at'],
};

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a valid identifier: ${name}`);
  return `\`${name}\``;
}

export function createTableSql(table: TableSpec): string {
  const columns = [...IDENTITY_COLUMNS, ...table.columns]
    .map((c) => `${quoteIdentifier(c.name)} ${c.type}`)
    .concat('`inserted_at` DateTime64(3) DEFAULT now64(3)');
  const orderBy = [...table.orderBy, 'row_id'].map(quoteIdentifier).join(', ');
  return `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table.name)} (\n  ${columns.join(',\n  ')}\n) ENGINE = ReplacingMergeTree(inserted_at) ORDER BY (${orderBy})`;
}

/** One JSON object per row, in JSONEachRow form, with fields checked against the table. */
export function toJsonEachRow(table: TableSpec, rows: readonly ResultRow[]): string {
  return rows
    .map((row) => JSON.stringify({ row_id: row.rowId, app: row.app, source: row.source, ...row.fields }))
    .join('\n');
}

/** Why a row doesn't fit its table, or undefined when it does. */
export function rowProblem(table: TableSpec, row: ResultRow): string | undefined {
  const known = new Map(table.columns.map((c) => [c.name, c.type]));
  for (const [name, value] of Object.entries(row.fields)) {
    const type = known.get(name);
    if (!type) return `unknown column "${name}" for table ${table.name}`;
    if (value === null) return `column "${name}" is null; columns are not nullable`;
    const numeric = type !== 'String';
    if (numeric !== (typeof value === 'number') && !(type === 'UInt8' && typeof value === 'boolean')) {
      return `column "${name}" (${type}) got ${typeof value} ${JSON.stringify(value)}`;
    }
    if (numeric && typeof value === 'number' && !Number.isFinite(value)) return `column "${name}" got ${value}`;
  }
  return undefined;
}
