import { invalidConfig } from './errors.js';
import { anchorOf, cross, distance, segmentsIntersect, toPixels, type Anchor, type Point } from './geometry.js';
import type { FrameInfo, TrackedFrame } from './track.js';

/**
 * A counting line. Follow it on screen from `from` to `to`: the side on your left is `positive`,
 * the side on your right `negative`, and a crossing is named by the side it goes towards. So a line drawn left to right across the image (west → east) has
 * `positive` above it: `{ positive: 'northbound', negative: 'southbound' }` names cars going up
 * the image northbound; drawing the same line right to left swaps them.
 */
export interface LineConfig {
  name: string;
  /** Fractions of the frame (0..1), origin top left. */
  from: Point;
  to: Point;
  /** Default `{ positive: 'positive', negative: 'negative' }`. */
  directions?: { positive: string; negative: string };
  /** Default `bottom-center`. */
  anchor?: Anchor;
  /**
   * How far from the line (fraction of the frame diagonal) a point must be before its side
   * counts. Default 0.01: a box whose anchor jitters on the line is never on either side.
   */
  margin?: number;
}

export interface CrossingEvent {
  line: string;
  trackId: string;
  className: string;
  direction: string;
  seq: number;
  timeMs: number;
}

export interface LineCrossing {
  readonly name: string;
  update(frame: FrameInfo, tracked: TrackedFrame): CrossingEvent[];
}

type Side = 1 | -1;

interface TrackState {
  /** The last side the track was seen on, and where. */
  side: Side;
  at: Point;
  counted: Set<Side>;
}

/**
 * Counts tracks crossing one line segment, per stream. A crossing is a change of side between
 * two observations of a track that are each at least `margin` from the line, where the path
 * between them passes through the segment itself (going round its end is not crossing). Each
 * track counts at most once per direction, so a track that wobbles across the line is counted
 * once, and one that crosses and comes back once each way. Fed tracker updates, it never sees a
 * late frame: the tracker returns no tracks for one.
 */
export function createLineCrossing(config: LineConfig): LineCrossing {
  const { name, from, to, directions = { positive: 'positive', negative: 'negative' }, anchor = 'bottom-center', margin = 0.01 } = config;
  if (from.x === to.x && from.y === to.y) throw invalidConfig('line crossing', `line ${name} has no length`, { line: name });
  if (!(margin >= 0)) throw invalidConfig('line crossing', `line ${name}: margin must be ≥ 0`, { line: name, margin });

  const states = new Map<string, TrackState>();

  return {
    name,
    update(frame, { tracks, ended = [] }) {
      // In pixels, since the margin is a distance and frames are not square.
      const a = toPixels(from, frame.width, frame.height);
      const b = toPixels(to, frame.width, frame.height);
      const minOffset = margin * Math.hypot(frame.width, frame.height) * distance(a, b);
      const events: CrossingEvent[] = [];

      for (const { trackId, detection } of tracks) {
        const at = anchorOf(detection.box, anchor);
        // |cross| is the distance from the line times the line's length.
        const offset = cross(a, b, at);
        if (Math.abs(offset) < minOffset || offset === 0) continue;
        const side: Side = offset > 0 ? 1 : -1;
        const state = states.get(trackId);
        if (!state) {
          states.set(trackId, { side, at, counted: new Set() });
          continue;
        }
        if (side !== state.side && segmentsIntersect(state.at, at, a, b) && !state.counted.has(side)) {
          state.counted.add(side);
          events.push({
            line: name,
            trackId,
            className: detection.className,
            direction: side === 1 ? directions.positive : directions.negative,
            seq: frame.seq,
            timeMs: frame.timeMs,
          });
        }
        state.side = side;
        state.at = at;
      }
      for (const { trackId } of ended) states.delete(trackId);
      return events;
    },
  };
}
