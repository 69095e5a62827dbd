import type { TableSpec } from '../core/index.js';

/** Tables shared by every app; rows carry their `app`, so one query can span apps. */

const frameColumns = [
  { name: 'frame_seq', type: 'UInt64' },
  { name: 'frame_time', type: 'DateTime64(3)' },
  { name: 'node', type: 'String' },
] as const;

const boxColumns = [
  { name: 'x1', type: 'Float32' },
  { name: 'y1', type: 'Float32' },
  { name: 'x2', type: 'Float32' },
  { name: 'y2', type: 'Float32' },
] as const;

/** One row per detected object. */
export const DETECTIONS: TableSpec = {
  name: 'detections',
  columns: [...frameColumns, { name: 'class', type: 'String' }, { name: 'score', type: 'Float32' }, ...boxColumns],
  orderBy: ['app', 'source', 'frame_seq'],
};

/** One row per analyzed frame and node: what the model saw at a glance. */
export const FRAMES: TableSpec = {
  name: 'frames',
  columns: [
    ...frameColumns,
    { name: 'width', type: 'UInt32' },
    { name: 'height', type: 'UInt32' },
    { name: 'objects', type: 'UInt32' },
    /** JSON object of class → count, e.g. {"car":2}. */
    { name: 'class_counts', type: 'String' },
  ],
  orderBy: ['app', 'source', 'frame_seq'],
};

/** One row per recognized line of text. */
export const TEXTS: TableSpec = {
  name: 'texts',
  columns: [...frameColumns, { name: 'text', type: 'String' }, { name: 'score', type: 'Float32' }, ...boxColumns],
  orderBy: ['app', 'source', 'frame_seq'],
};

export const APP_TABLES: readonly TableSpec[] = [DETECTIONS, FRAMES, TEXTS];
