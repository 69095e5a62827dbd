import type { ResultRow, TableSpec } from '../core/index.js';

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
}

/** The settings that enforce the limits, in ClickHouse's names. */
export function limitSettings(limits: QueryLimits = {}): Record<string, string> {
  return {
    max_result_rows: String(limits.maxResultRows ?? 100_000),
    result_overflow_mode: 'throw',
    max_execution_time: String(limits.maxExecutionS ?? 30),
  };
}

export interface QueryResult {
  columns: { name: string; type: string }[];
  rows: Record<string, unknown>[];
}
