import { ErrorCode, PanoptesError, type ResultRow, type TableSpec } from '../core/index.js';

/**
 * The ResultSink port: where result rows are stored and how users read them back.
 * Adapters: chDB (embedded ClickHouse, the default) and a ClickHouse server.
 * Not in the port: connection pooling, server settings.
 */
export interface ResultSink {
  readonly kind: 'chdb' | 'server';
  /**
   * Brings the database to this build's schema (`ensureSchema`): the operator tables and these,
   * each a `_raw` table and a deduplicating view. Safe to call at every start.
   */
  ensureTables(tables: readonly TableSpec[]): Promise<void>;
  /** Inserts rows of one table (into its `_raw` table); all or nothing. */
  insert(table: TableSpec, rows: readonly ResultRow[]): Promise<void>;
  /** Runs a read-only query. */
  query(sql: string): Promise<QueryResult>;
  close(): Promise<void>;
}

/** What a read-only sink lets one query use; beyond it the query fails and says which limit. */
export interface QueryLimits {
  /** @defaultValue 100000 */
  maxResultRows?: number;
  /** @defaultValue 30 */
  maxExecutionS?: number;
  /** Memory one query may use, bytes. @defaultValue 1 GiB */
  maxMemoryBytes?: number;
  /** Size of one answer, bytes, as the engine holds it (JSON text is larger). @defaultValue 64 MiB */
  maxResultBytes?: number;
}

/** The settings that enforce the limits, in ClickHouse's names. */
export function limitSettings(limits: QueryLimits = {}): Record<string, string> {
  return {
    max_result_rows: String(limits.maxResultRows ?? 100_000),
    max_result_bytes: String(limits.maxResultBytes ?? 64 * 1024 * 1024),
    result_overflow_mode: 'throw',
    max_memory_usage: String(limits.maxMemoryBytes ?? 1024 * 1024 * 1024),
    max_execution_time: String(limits.maxExecutionS ?? 30),
  };
}

/** The engine's errors for its limits, and what to do about each. */
const LIMIT_ADVICE: readonly (readonly [RegExp, string])[] = [
  [/TOO_MANY_ROWS_OR_BYTES|Code: 396\b/, 'the answer is over a result limit; add a LIMIT, aggregate or select fewer columns'],
  [/TIMEOUT_EXCEEDED|Code: 159\b/, 'the query ran past its time limit; narrow it, e.g. with a WHERE on the time column'],
  [/MEMORY_LIMIT_EXCEEDED|Code: 241\b/, 'the query needed more memory than its limit; aggregate over fewer rows or columns'],
];

/** A failed query's message: where the engine stopped it at one of its limits, what to do, before the engine's own words. */
export function queryFailure(message: string): string {
  const advice = LIMIT_ADVICE.find(([pattern]) => pattern.test(message))?.[1];
  return `query failed: ${advice ? `${advice} (${message})` : message}`;
}

/**
 * The engine's result limits do not hold everywhere (chDB's local mode lets a SELECT without
 * FROM past max_result_rows): the answer itself is checked too, before it is handed on.
 */
export function checkAnswer(answer: { rows: number; bytes?: number }, limits: QueryLimits = {}): void {
  const settings = limitSettings(limits);
  const maxRows = Number(settings.max_result_rows);
  const maxBytes = Number(settings.max_result_bytes);
  if (answer.rows > maxRows) {
    throw new PanoptesError(ErrorCode.QueryFailed, `query failed: the answer has ${answer.rows} rows, over the limit of ${maxRows}; add a LIMIT or aggregate`);
  }
  if (answer.bytes !== undefined && answer.bytes > maxBytes) {
    const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);
    throw new PanoptesError(ErrorCode.QueryFailed, `query failed: the answer is ${mb(answer.bytes)} MB, over the limit of ${mb(maxBytes)} MB; select fewer columns or rows`);
  }
}

export interface QueryResult {
  columns: { name: string; type: string }[];
  rows: Record<string, unknown>[];
}
