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
  /**
   * Sort key for the queries users run most; `row_id` is appended to it. Only columns that are
   * the same in every write of a row: ReplacingMergeTree collapses rows with equal sort keys.
   */
  orderBy: readonly string[];
  /** The `DateTime64(3)` column a row is about: retention counts from it. */
  timeColumn?: string;
  /**
   * Partition by the day of `timeColumn` (default true). Off where that time may differ between
   * two writes of one row: ReplacingMergeTree deduplicates within a partition only.
   */
  partitionByDay?: boolean;
}

export interface NodeResult {
  node: AppNode;
  frame: FrameRef;
  /** Boxes in frame pixels. */
  output: NodeOutput;
  /** Id of what the node ran on: the frame (`frameId`) or the parent's output (`outputId`). */
  inputId: string;
  /** True for nodes fed by `frames`, false for nodes fed by another node's crops. */
  root: boolean;
}

export interface AppLogic {
  readonly spec: AppSpec;
  readonly tables: readonly TableSpec[];
  /**
   * Rows for one node's output. Operators with state (trackers, change detectors) keep it per
   * source, so a source's frames should come in order; a frame older than the last one seen is
   * stored but moves no operator.
   */
  rowsFor(result: NodeResult): ResultRow[];
  /** Rows the operators still hold (tracks in view, stays in zones), for the end of the streams. */
  flush(): ResultRow[];
  /**
   * The same for each source no frame has come from for `idleMs` (a replay that ended, a camera
   * gone), whose operators' state is then let go: a source that comes back starts afresh.
   */
  flushIdle(idleMs: number): ResultRow[];
}

/**
 * Ids of what flows through an app's DAG, the base of every row id: deterministic, so a
 * replayed frame yields the same ids and the tables keep one copy.
 */
export function frameId(app: string, source: string, seq: number): string {
  return `${app}/${source}/${seq}`;
}

/** The `index`-th output of `node` on the input `inputId`. */
export function outputId(inputId: string, node: string, index: number): string {
  return `${inputId}/${node}/${index}`;
}
