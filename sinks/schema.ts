import { ErrorCode, PanoptesError, type ColumnSpec, type ColumnType, type FieldValue, type ResultRow, type TableSpec } from '../core/index.js';

/**
 * Table DDL from the apps' TableSpecs. Every table carries the row's identity columns; the
 * engine is ReplacingMergeTree keyed by `row_id`, so a row written twice (a replayed message,
 * a retried insert) collapses to one, and users read it through a view with `FINAL` that
 * deduplicates before ClickHouse has merged the copies.
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
  // Neither `stage` nor `at` sorts or partitions: a drop seen again (another backend took over
  // the partition, a redelivery) names another instance and time, and must still collapse.
  orderBy: ['source'],
  timeColumn: 'at',
  partitionByDay: false,
};

/** What each backend's sessions did per stats interval (`panoptes.stats`); `source` is the backend. */
export const SESSION_STATS_TABLE: TableSpec = {
  name: 'session_stats',
  columns: [
    /** End of the interval. */
    { name: 'at', type: 'DateTime64(3)' },
    { name: 'interval_ms', type: 'UInt32' },
    { name: 'backend', type: 'String' },
    { name: 'session', type: 'String' },
    /** Requests per second. */
    { name: 'arrival_rate', type: 'Float64' },
    { name: 'queue_length', type: 'UInt32' },
    { name: 'batches', type: 'UInt32' },
    { name: 'mean_batch', type: 'Float32' },
    { name: 'max_batch', type: 'UInt32' },
    { name: 'latency_p50_ms', type: 'Float32' },
    { name: 'latency_p99_ms', type: 'Float32' },
    { name: 'dropped', type: 'UInt64' },
    /** Share of requests that missed their deadline or were dropped, 0..1. */
    { name: 'bad_rate', type: 'Float32' },
    /**
     * A specialized node's row (session `app/node`) is about one stream: the thesis' Table 5.4
     * since the backend began serving it. Other rows leave these empty.
     */
    { name: 'stream', type: 'String' },
    /** Share of inputs in the specialized phase. */
    { name: 'special_rate', type: 'Float32' },
    /** Share of the specialized phase's inputs the specialized model passed to the oracle ("other"). */
    { name: 'cascade_rate', type: 'Float32' },
    /** Entries into the specialized phase, and the mean |D| and window w they began with. */
    { name: 'transitions', type: 'UInt32' },
    { name: 'mean_dominant', type: 'Float32' },
    { name: 'mean_window', type: 'Float32' },
    /**
     * A learned cache's row (session `app/node`, `stream` its source) since the backend began
     * serving the stream: the layer it answers at, its hit rate, the hit rate and accuracy its
     * selector was calibrated to (expected) beside the accuracy of the hits checked (observed).
     */
    { name: 'cache_layer', type: 'String' },
    { name: 'cache_variant', type: 'String' },
    { name: 'hit_rate', type: 'Float32' },
    { name: 'expected_hit_rate', type: 'Float32' },
    { name: 'checked_hits', type: 'UInt64' },
    { name: 'observed_accuracy', type: 'Float32' },
    { name: 'expected_accuracy', type: 'Float32' },
    /** Retrainings of a specialized node's or a cache's models, and their total time. */
    { name: 'retrains', type: 'UInt32' },
    { name: 'retrain_ms', type: 'Float64' },
    /** A cache's retrainings that failed (its selector serves on, or none does): each is a reason to read the backend's log. */
    { name: 'failed_retrains', type: 'UInt32' },
  ],
  orderBy: ['session', 'at'],
  timeColumn: 'at',
};

/** Per app and stats interval, on each backend: its frames and how many of its model requests met their deadlines; `source` is the backend. */
export const APP_STATS_TABLE: TableSpec = {
  name: 'app_stats',
  columns: [
    /** End of the interval. */
    { name: 'at', type: 'DateTime64(3)' },
    { name: 'interval_ms', type: 'UInt32' },
    { name: 'backend', type: 'String' },
    /** Frames per second the backend took in for the app. */
    { name: 'frames_rate', type: 'Float64' },
    /** The app's model requests that finished or were dropped, and of them those late or dropped. */
    { name: 'requests', type: 'UInt64' },
    { name: 'late', type: 'UInt64' },
    { name: 'dropped', type: 'UInt64' },
    /** Share of requests on time, 0..1 (1 in an interval without requests). */
    { name: 'slo_attainment', type: 'Float32' },
  ],
  orderBy: ['app', 'at'],
  timeColumn: 'at',
};

/** Every epoch's placements (`panoptes.plan`): one row per backend and session; `source` is the backend. */
export const PLANS_TABLE: TableSpec = {
  name: 'plans',
  columns: [
    { name: 'epoch', type: 'UInt64' },
    /** When the scheduler made the plan. */
    { name: 'at', type: 'DateTime64(3)' },
    { name: 'backend', type: 'String' },
    { name: 'duty_cycle_ms', type: 'Float32' },
    { name: 'session', type: 'String' },
    { name: 'model', type: 'String' },
    { name: 'slo_ms', type: 'Float32' },
    { name: 'batch', type: 'UInt32' },
    /** JSON object of topic → this backend's share of the session's partitions there. */
    { name: 'routing', type: 'String' },
  ],
  orderBy: ['at', 'epoch'],
  timeColumn: 'at',
};

/** The tables every results database has besides the apps' own. */
export const OPERATOR_TABLES: readonly TableSpec[] = [DROPS_TABLE, SESSION_STATS_TABLE, APP_STATS_TABLE, PLANS_TABLE];

/**
 * Rows are written to `<name>_raw`; users read `<name>`, a view of it with `FINAL`, so a row
 * written twice counts once even before ClickHouse merges the copies.
 */
export const rawName = (table: string): string => `${table}_raw`;

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a valid identifier: ${name}`);
  return `\`${name}\``;
}

/**
 * What the ClickHouse at hand accepts. chDB and current servers have DateTime64 and TTL (since
 * 20.1 and 19.6); Debian's clickhouse-server 18.16 has neither: its times are DateTime, to the
 * second, it keeps rows forever, and it fills columns a JSONEachRow insert leaves out with zeros
 * instead of their defaults.
 */
export interface SqlDialect {
  version: string;
  dateTime64: boolean;
  ttl: boolean;
}
export const CURRENT_DIALECT: SqlDialect = { version: 'current', dateTime64: true, ttl: true };

/** The dialect of a server by its `version()`, e.g. "18.16.1" or "24.8.4.13". */
export function dialectOf(version: string): SqlDialect {
  const modern = !(Number(version.split('.')[0]) < 20);
  return { version, dateTime64: modern, ttl: modern };
}

const columnType = (type: ColumnType, dialect: SqlDialect): string => (type === 'DateTime64(3)' && !dialect.dateTime64 ? 'DateTime' : type);

/** The columns of a table as the dialect stores them, `inserted_at` included. */
export function expectedColumns(table: TableSpec, dialect: SqlDialect): { name: string; type: string }[] {
  return [...IDENTITY_COLUMNS, ...table.columns]
    .map((c) => ({ name: c.name, type: columnType(c.type, dialect) }))
    .concat({ name: 'inserted_at', type: dialect.dateTime64 ? 'DateTime64(3)' : 'DateTime' });
}

/** How long rows are kept, as a TTL expression; undefined keeps them. */
export function ttlExpression(table: TableSpec, retentionDays: number | undefined): string | undefined {
  if (retentionDays === undefined || !table.timeColumn) return undefined;
  return `toDateTime(${quoteIdentifier(table.timeColumn)}) + INTERVAL ${retentionDays} DAY`;
}

/** The days of retention an `engine_full` from system.tables carries, or undefined for none. */
export function retentionIn(engineFull: string): number | undefined {
  const days = /\bTTL\b.*?toIntervalDay\((\d+)\)/.exec(engineFull)?.[1];
  return days === undefined ? undefined : Number(days);
}

export function createTableSql(table: TableSpec, dialect: SqlDialect = CURRENT_DIALECT, retentionDays?: number): string {
  quoteIdentifier(table.name);
  const defaultNow = dialect.dateTime64 ? 'DEFAULT now64(3)' : 'DEFAULT now()';
  const columns = expectedColumns(table, dialect).map((c) => `${quoteIdentifier(c.name)} ${c.type}${c.name === 'inserted_at' ? ` ${defaultNow}` : ''}`);
  const orderBy = [...table.orderBy, 'row_id'].map(quoteIdentifier).join(', ');
  const partition = table.timeColumn && table.partitionByDay !== false ? ` PARTITION BY toYYYYMMDD(${quoteIdentifier(table.timeColumn)})` : '';
  const ttl = dialect.ttl ? ttlExpression(table, retentionDays) : undefined;
  return (
    `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(rawName(table.name))} (\n  ${columns.join(',\n  ')}\n)` +
    ` ENGINE = ReplacingMergeTree(inserted_at)${partition} ORDER BY (${orderBy})${ttl ? ` TTL ${ttl}` : ''}`
  );
}

/** The view users query: the raw table, deduplicated. */
export const createViewSql = (table: TableSpec): string =>
  `CREATE VIEW IF NOT EXISTS ${quoteIdentifier(table.name)} AS SELECT * FROM ${quoteIdentifier(rawName(table.name))} FINAL`;

/** SQL listing a table's or view's columns; both chDB and 18.16 servers answer it. */
export const columnsSql = (name: string): string =>
  `SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = '${name.replace(/'/g, '')}'`;

/**
 * Compares a raw table's columns with what this build writes: returns the columns to add, and
 * throws `SinkSchemaMismatch` for a column that has another type, naming each and the statement
 * that would fix it (ClickHouse can't always convert in place, so that is the operator's call).
 * Columns the table has beyond those are left alone.
 */
export function missingColumns(table: TableSpec, actual: readonly Record<string, unknown>[], dialect: SqlDialect = CURRENT_DIALECT): { name: string; type: string }[] {
  const found = new Map(actual.map((c) => [String(c.name), String(c.type)]));
  const raw = rawName(table.name);
  const expected = expectedColumns(table, dialect);
  const problems = expected.flatMap(({ name, type }) => {
    const has = found.get(name);
    return has === undefined || has === type ? [] : [`column ${name} is ${has}, expected ${type} (ALTER TABLE ${raw} MODIFY COLUMN ${name} ${type})`];
  });
  if (problems.length > 0) {
    throw new PanoptesError(
      ErrorCode.SinkSchemaMismatch,
      `table ${raw} exists with another schema: ${problems.join('; ')}; or store results in a new database or data directory`,
      { details: { table: raw, problems } },
    );
  }
  return expected.filter((c) => !found.has(c.name));
}

/**
 * The latest version of each row in a batch: the one made last (`versionMs`), else the one that
 * came last. ClickHouse keeps either of two versions inserted with one `inserted_at`.
 */
function latestVersions(rows: readonly ResultRow[]): ResultRow[] {
  const byId = new Map<string, ResultRow>();
  for (const row of rows) {
    const seen = byId.get(row.rowId);
    if (seen && (seen.versionMs ?? 0) > (row.versionMs ?? 0)) continue;
    byId.delete(row.rowId);
    byId.set(row.rowId, row);
  }
  return [...byId.values()];
}

/**
 * Rows as JSONEachRow objects, the latest version of each. Times are ms since epoch; a DateTime
 * column takes seconds. A row's `versionMs` is its `inserted_at`, the version ReplacingMergeTree
 * keeps the greatest of, so a version made later wins however late the earlier one arrives (to
 * the second on servers before 20, whose `inserted_at` is a DateTime).
 */
export function toInsertRows(table: TableSpec, batch: readonly ResultRow[], dialect: SqlDialect = CURRENT_DIALECT): Record<string, unknown>[] {
  const rows = latestVersions(batch);
  if (dialect.dateTime64) {
    return rows.map((row) => ({ row_id: row.rowId, app: row.app, source: row.source, ...row.fields, ...(row.versionMs !== undefined ? { inserted_at: row.versionMs } : {}) }));
  }
  const times = table.columns.filter((c) => c.type === 'DateTime64(3)').map((c) => c.name);
  const now = Date.now();
  return rows.map((row) => {
    const fields: Record<string, unknown> = { ...row.fields };
    for (const name of times) if (typeof fields[name] === 'number') fields[name] = Math.floor(fields[name] / 1000);
    return { row_id: row.rowId, app: row.app, source: row.source, ...fields, inserted_at: Math.floor((row.versionMs ?? now) / 1000) };
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

/** How far ahead of the sink's clock a row's `versionMs` may be (clocks of other machines drift). */
const MAX_VERSION_AHEAD_MS = 3_600_000;

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
export function rowProblem(table: TableSpec, row: ResultRow, nowMs = Date.now()): string | undefined {
  // A version from the future would stand for ever: no later write of the row could replace it.
  if (row.versionMs !== undefined && row.versionMs > nowMs + MAX_VERSION_AHEAD_MS) return `versionMs ${row.versionMs} is more than an hour ahead of the sink's clock`;
  const types = new Map(table.columns.map((c) => [c.name, c.type]));
  for (const [name, value] of Object.entries(row.fields)) {
    const type = types.get(name);
    if (!type) return `unknown column "${name}" for table ${table.name}`;
    const problem = valueProblem(type, value);
    if (problem) return `column "${name}" (${type}) ${problem}`;
  }
  return undefined;
}
