import type { AppNode, AppSpec } from './config/index.js';
import type { ResultRow } from './contracts/index.js';
import type { FrameRef, NodeOutput } from './vision.js';

/**
 * The seam between apps and the rest: apps declare tables and turn model outputs into rows;
 * the backend calls them, the sink creates their tables. Composition roots wire them together.
 */

export type ColumnType = 'String' | 'UInt8' | 'UInt32' | 'UInt64' | 'Int64' | 'Float32' | 'Float64' | 'DateTime64(3)';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
}

/**
 * A results table. Every table also has `row_id`, `app` and `source` (from the ResultRow) and
 * `inserted_at`; `columns` are the app's own fields.
 */
export interface TableSpec {
  name: string;
  columns: readonly ColumnSpec[];
  /** Sort key for the queries users run most; `row_id` is appended to it. */
  orderBy: readonly string[];
}

export interface AppLogic {
  readonly spec: AppSpec;
  readonly tables: readonly TableSpec[];
  /** Rows for one node's output on one frame. Pure: the same input gives the same rows. */
  rowsFor(input: { node: AppNode; frame: FrameRef; output: NodeOutput }): ResultRow[];
}
