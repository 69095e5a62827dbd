/** A sampled video frame, as published by ingest on `panoptes.frames` (key = source id). */
export interface Frame {
  /** Source id from the deployment config. */
  source: string;
  /** Index of the sampled frame within its source, from 0. */
  seq: number;
  /** When the frame was captured, ms since epoch: wall clock for live, replay start + pts for files. */
  captureTimeMs: number;
  /** Presentation time within the stream, ms. */
  ptsMs: number;
  width: number;
  height: number;
  jpeg: Uint8Array;
}
