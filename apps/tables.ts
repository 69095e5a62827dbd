import type { TableSpec } from '../core/index.js';

/** Tables shared by every app; rows carry their `app`, so one query can span apps. */

const frameColumns = [
  { name: 'frame_seq', type: 'UInt64' },
  { name: 'frame_time', type: 'DateTime64(3)' },
  { name: 'node', type: 'String' },
] as const;

/** The model whose output the row holds: the node's, or what served it instead (a cheaper variant, an ingest worker's local model). */
const modelColumn = { name: 'model', type: 'String' } as const;

const boxColumns = [
  { name: 'x1', type: 'Float32' },
  { name: 'y1', type: 'Float32' },
  { name: 'x2', type: 'Float32' },
  { name: 'y2', type: 'Float32' },
] as const;

/** Where a node with a learned cache answered: `full` or the candidate layer, and the cache's variant; empty without a cache. */
const exitColumns = [
  { name: 'exit', type: 'String' },
  { name: 'cache_variant', type: 'String' },
] as const;

const perFrame = { orderBy: ['app', 'source', 'frame_seq'], timeColumn: 'frame_time' } as const;

/** One row per detected object. */
export const DETECTIONS: TableSpec = {
  name: 'detections',
  columns: [
    ...frameColumns,
    modelColumn,
    { name: 'class', type: 'String' },
    { name: 'score', type: 'Float32' },
    ...boxColumns,
    /** The object's track within its source, where the node tracks; else empty. */
    { name: 'track_id', type: 'String' },
    ...exitColumns,
  ],
  ...perFrame,
};

/** One row per analyzed frame and node: what the model saw at a glance. */
export const FRAMES: TableSpec = {
  name: 'frames',
  columns: [
    ...frameColumns,
    modelColumn,
    { name: 'width', type: 'UInt32' },
    { name: 'height', type: 'UInt32' },
    { name: 'objects', type: 'UInt32' },
    /** JSON object of class → count, e.g. {"car":2}. */
    { name: 'class_counts', type: 'String' },
    ...exitColumns,
  ],
  ...perFrame,
};

/**
 * One row per thing recognized about an object or a region: a line of text read, an identity,
 * or one attribute (age, gender, ...).
 */
export const RECOGNITIONS: TableSpec = {
  name: 'recognitions',
  columns: [
    ...frameColumns,
    modelColumn,
    /** `text` (a line read), `field` (a value parsed out of it) or `attribute` (a face's age, gender). */
    { name: 'kind', type: 'String' },
    /** The attribute's name (`age`, `gender`) or the HUD field's; empty for plain text. */
    { name: 'name', type: 'String' },
    /** The text read, the identity, the attribute's value. */
    { name: 'value', type: 'String' },
    /** `value` as a number where it is one (a HUD counter, an age), else 0. */
    { name: 'number', type: 'Float64' },
    { name: 'score', type: 'Float32' },
    /** Row id of the detection this describes; empty when it describes a region of the frame. */
    { name: 'object_id', type: 'String' },
    ...boxColumns,
    /** The track of the object this describes (or of the tracked object it was found on); else empty. */
    { name: 'track_id', type: 'String' },
    /** A specialized node's answerer: `oracle`, `cascade` or `fall-through`; else empty. */
    { name: 'answered_by', type: 'String' },
    ...exitColumns,
  ],
  ...perFrame,
};

/** One row per event an app's operators detect: a line crossed, a dwell ended, a value changed. */
export const EVENTS: TableSpec = {
  name: 'events',
  columns: [
    ...frameColumns,
    /** `line_crossing`, `dwell`, `track` (an object left the picture), `change` (a field's value). */
    { name: 'event', type: 'String' },
    /** The line, zone or field the event is about; the tracking node for `track`. */
    { name: 'name', type: 'String' },
    /** The tracked object's id within its source; empty for events about the frame. */
    { name: 'track_id', type: 'String' },
    { name: 'class', type: 'String' },
    /** The direction of a crossing, as its line names it; empty otherwise. */
    { name: 'direction', type: 'String' },
    /** The new value of a changed field; for `track`, what was gathered about the object, as JSON. */
    { name: 'value', type: 'String' },
    { name: 'previous', type: 'String' },
    /** How long the object stayed: in the zone for `dwell`, in view for `track`. */
    { name: 'duration_ms', type: 'UInt64' },
    /**
     * The event's picture, where one was taken: the frame it was seen on with the object's box
     * drawn, at `snapshots/<path>` in the data directory and `/snapshots/<path>` of the HTTP API.
     */
    { name: 'snapshot', type: 'String' },
  ],
  ...perFrame,
};

export const APP_TABLES: readonly TableSpec[] = [DETECTIONS, FRAMES, RECOGNITIONS, EVENTS];
