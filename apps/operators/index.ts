/**
 * Stateful per-stream operators for the analytics apps: tracking, line crossing, zone dwell, HUD
 * text parsing with change detection, and per-track attribute aggregation. Pure: plain data in,
 * plain data out, no I/O. The caller keeps one instance per (app, source) and prefixes the ids
 * they return with app and source.
 */
export { createTracker, STREAM_RESTART_GAP, type EndedTrack, type FrameInfo, type Track, type TrackedFrame, type Tracker, type TrackerOptions, type TrackUpdate } from './track.js';
export { createLineCrossing, type CrossingEvent, type LineConfig, type LineCrossing } from './line-crossing.js';
export { createZoneDwell, type Visit, type ZoneConfig, type ZoneDwell, type ZoneUpdate } from './zone-dwell.js';
export {
  createChangeDetector,
  createTextParser,
  ocrDigits,
  parseClock,
  type ChangeDetector,
  type ChangeDetectorOptions,
  type ChangeEvent,
  type FieldPattern,
  type FieldType,
  type FieldValue,
  type ParsedField,
  type TextParser,
} from './text-parse.js';
export { createAttributeAggregator, type AttributeAggregator, type Attributes, type AttributeSummary, type Gender } from './aggregate.js';
export { anchorOf, iou, pointInPolygon, segmentsIntersect, type Anchor, type Point } from './geometry.js';
