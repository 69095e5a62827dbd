import { invalidConfig } from './errors.js';
import { anchorOf, pointInPolygon, toPixels, type Anchor, type Point } from './geometry.js';
import type { FrameInfo, TrackedFrame } from './track.js';

export interface ZoneConfig {
  name: string;
  /** Corners in fractions of the frame (0..1), origin top left, in order round the zone. */
  polygon: readonly Point[];
  /** Default `bottom-center`: a person is in a zone drawn on the floor when their feet are. */
  anchor?: Anchor;
}

/** One stay of a track in a zone. */
export interface Visit {
  zone: string;
  trackId: string;
  className: string;
  /** When the track was first seen inside. */
  enterMs: number;
  enterSeq: number;
  /** When it was first seen outside again; for a track that ended inside, when it was last seen. */
  exitMs: number;
  exitSeq: number;
  dwellMs: number;
  /** Frames it was seen inside. */
  frames: number;
}

export interface ZoneUpdate {
  /** Stays that ended with this frame. */
  visits: Visit[];
  /** Tracks seen inside the zone in this frame (an occluded one is not counted). */
  inside: number;
}

export interface ZoneDwell {
  readonly name: string;
  update(frame: FrameInfo, tracked: TrackedFrame): ZoneUpdate;
  /** Closes the stays of tracks still inside, at their last sighting: for the end of a stream. */
  flush(): Visit[];
}

interface Stay {
  className: string;
  enterMs: number;
  enterSeq: number;
  lastMs: number;
  lastSeq: number;
  frames: number;
}

const visit = (zone: string, trackId: string, s: Stay, exitMs: number, exitSeq: number): Visit => ({
  zone,
  trackId,
  className: s.className,
  enterMs: s.enterMs,
  enterSeq: s.enterSeq,
  exitMs,
  exitSeq,
  dwellMs: exitMs - s.enterMs,
  frames: s.frames,
});

/**
 * Dwell time in one polygon zone, per stream. Entry and exit are the frames in which the change
 * was first seen, so at a steady sampling rate the error is under one frame interval either way.
 * A track that ends inside has no frame showing it leave; its stay closes at its last sighting.
 */
export function createZoneDwell(config: ZoneConfig): ZoneDwell {
  const { name, polygon, anchor = 'bottom-center' } = config;
  if (polygon.length < 3) throw invalidConfig('zone dwell', `zone ${name} needs at least 3 corners`, { zone: name, corners: polygon.length });

  /** Tracks inside, in the order they entered. */
  const stays = new Map<string, Stay>();

  return {
    name,
    update(frame, { tracks, ended = [] }) {
      const corners = polygon.map((p) => toPixels(p, frame.width, frame.height));
      const visits: Visit[] = [];
      let inside = 0;

      for (const { trackId, detection } of tracks) {
        const stay = stays.get(trackId);
        if (pointInPolygon(anchorOf(detection.box, anchor), corners)) {
          inside += 1;
          if (stay) {
            Object.assign(stay, { lastMs: frame.timeMs, lastSeq: frame.seq, className: detection.className });
            stay.frames += 1;
          } else {
            const at = { enterMs: frame.timeMs, enterSeq: frame.seq, lastMs: frame.timeMs, lastSeq: frame.seq };
            stays.set(trackId, { className: detection.className, ...at, frames: 1 });
          }
        } else if (stay) {
          visits.push(visit(name, trackId, stay, frame.timeMs, frame.seq));
          stays.delete(trackId);
        }
      }
      for (const { trackId } of ended) {
        const stay = stays.get(trackId);
        if (!stay) continue;
        visits.push(visit(name, trackId, stay, stay.lastMs, stay.lastSeq));
        stays.delete(trackId);
      }
      return { visits, inside };
    },

    flush() {
      const open = [...stays].map(([trackId, s]) => visit(name, trackId, s, s.lastMs, s.lastSeq));
      stays.clear();
      return open;
    },
  };
}
