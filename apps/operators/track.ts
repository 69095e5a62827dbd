import type { Box, Detection } from '../../core/index.js';
import { invalidConfig } from './errors.js';
import { anchorOf, distance, iou } from './geometry.js';

/**
 * How far behind a stream's last frame a frame may come and still be a redelivery (skipped as
 * stale). One further behind starts the stream again: a replay run a second time under its id,
 * or a frame whose seq was forged far ahead, which would otherwise make every later one stale.
 */
export const STREAM_RESTART_GAP = 1000;

/** What an operator needs to know about a frame: its place in the stream and its size in pixels. */
export interface FrameInfo {
  seq: number;
  timeMs: number;
  width: number;
  height: number;
}

export interface TrackerOptions {
  /**
   * `iou` (default) matches a detection to the track whose last box overlaps it most: robust
   * for objects that move less than their own size between analyzed frames. `centroid` matches
   * by distance between box centres, which keeps fast small objects (a ball, a far car at a low
   * sampling rate) whose boxes no longer overlap, at the cost of more swaps in crowds.
   */
  method?: 'iou' | 'centroid';
  /** `iou`: least overlap for a match. Default 0.3. */
  minIou?: number;
  /** `centroid`: farthest a centre may move between observations, as a fraction of the frame diagonal. Default 0.1. */
  maxDistance?: number;
  /** Analyzed frames a track may go unseen (occlusion, a missed detection) before it ends. Default 5. */
  maxMissedFrames?: number;
  /** Match only detections of the track's class. Default true. */
  sameClass?: boolean;
}

/** A detection with the track it belongs to. */
export interface Track {
  /**
   * `${firstSeq}-${index}`: the frame the track started in and the detection's index there. Unique
   * within a stream and the same on every replay; the caller prefixes app and source.
   */
  trackId: string;
  detection: Detection;
  /** Frames the track has been seen in, this one included (1 on the frame it starts). */
  age: number;
  firstSeq: number;
  firstSeenMs: number;
}

/** A track that ended: not seen for more than `maxMissedFrames` frames, or flushed at the end of the stream. */
export interface EndedTrack {
  trackId: string;
  className: string;
  age: number;
  firstSeq: number;
  firstSeenMs: number;
  lastSeq: number;
  lastSeenMs: number;
  /** Where it was last seen. */
  box: Box;
}

export interface TrackUpdate {
  /** One per input detection, in the same order. */
  tracks: Track[];
  /** Tracks that ended with this frame, oldest first. */
  ended: EndedTrack[];
  /** True when the frame was ignored because its seq was not after the last one seen. */
  stale: boolean;
}

/** What line and zone operators read from a `TrackUpdate`: where tracks are, and which ended. */
export interface TrackedFrame {
  tracks: readonly Pick<Track, 'trackId' | 'detection'>[];
  /** Tracks that ended; their state is dropped. */
  ended?: readonly { trackId: string }[];
}

export interface Tracker {
  update(frame: FrameInfo, detections: readonly Detection[]): TrackUpdate;
  /** Ends every live track, for the end of a stream. */
  flush(): EndedTrack[];
  /** Tracks alive now (seen, or missed for at most `maxMissedFrames`). */
  readonly size: number;
}

interface LiveTrack {
  id: string;
  className: string;
  box: Box;
  age: number;
  missed: number;
  firstSeq: number;
  firstSeenMs: number;
  lastSeq: number;
  lastSeenMs: number;
}

interface Candidate {
  track: number;
  detection: number;
  /** Higher is better for both methods. */
  score: number;
}

const ended = (t: LiveTrack): EndedTrack => ({
  trackId: t.id,
  className: t.className,
  age: t.age,
  firstSeq: t.firstSeq,
  firstSeenMs: t.firstSeenMs,
  lastSeq: t.lastSeq,
  lastSeenMs: t.lastSeenMs,
  box: t.box,
});

/**
 * A tracker for one stream of one app: greedy association of each frame's detections to live
 * tracks, best pair first. No motion model: a track is matched from where it was last seen.
 * Deterministic: ids come from frame seqs and detection order, and ties are broken by track age
 * and detection order, so a replay of the same frames gives the same ids.
 */
export function createTracker(options: TrackerOptions = {}): Tracker {
  const { method = 'iou', minIou = 0.3, maxDistance = 0.1, maxMissedFrames = 5, sameClass = true } = options;
  if (!(minIou > 0 && minIou <= 1)) throw invalidConfig('tracker', 'minIou must be in (0, 1]', { minIou });
  if (!(maxDistance > 0)) throw invalidConfig('tracker', 'maxDistance must be a positive fraction of the frame diagonal', { maxDistance });
  if (!(Number.isInteger(maxMissedFrames) && maxMissedFrames >= 0)) {
    throw invalidConfig('tracker', 'maxMissedFrames must be a whole number ≥ 0', { maxMissedFrames });
  }

  /** Oldest first, which is also the tie-break order. */
  let live: LiveTrack[] = [];
  let lastSeq: number | undefined;

  function candidates(frame: FrameInfo, detections: readonly Detection[]): Candidate[] {
    const reach = maxDistance * Math.hypot(frame.width, frame.height);
    const found: Candidate[] = [];
    live.forEach((t, ti) => {
      detections.forEach((d, di) => {
        if (sameClass && d.className !== t.className) return;
        if (method === 'iou') {
          const overlap = iou(t.box, d.box);
          if (overlap >= minIou) found.push({ track: ti, detection: di, score: overlap });
        } else {
          const moved = distance(anchorOf(t.box, 'center'), anchorOf(d.box, 'center'));
          if (moved <= reach) found.push({ track: ti, detection: di, score: -moved });
        }
      });
    });
    return found.sort((a, b) => b.score - a.score || a.track - b.track || a.detection - b.detection);
  }

  return {
    update(frame, detections) {
      // Frames of a stream can arrive late or twice, e.g. redelivered after a consumer-group
      // rebalance. Applying one after a later frame would move tracks backwards in time and
      // change ids, so it is dropped; the frame it duplicates was already tracked.
      if (lastSeq !== undefined && frame.seq <= lastSeq) return { tracks: [], ended: [], stale: true };
      lastSeq = frame.seq;

      const trackOf = new Array<LiveTrack | undefined>(detections.length);
      const matched = new Set<number>();
      for (const c of candidates(frame, detections)) {
        if (matched.has(c.track) || trackOf[c.detection]) continue;
        matched.add(c.track);
        trackOf[c.detection] = live[c.track];
      }

      const gone: EndedTrack[] = [];
      live = live.filter((t, ti) => {
        if (matched.has(ti)) return true;
        t.missed += 1;
        if (t.missed <= maxMissedFrames) return true;
        gone.push(ended(t));
        return false;
      });

      const tracks = detections.map((detection, di): Track => {
        let t = trackOf[di];
        if (t) {
          Object.assign(t, { box: detection.box, className: detection.className, missed: 0, lastSeq: frame.seq, lastSeenMs: frame.timeMs });
          t.age += 1;
        } else {
          t = {
            id: `${frame.seq}-${di}`,
            className: detection.className,
            box: detection.box,
            age: 1,
            missed: 0,
            firstSeq: frame.seq,
            firstSeenMs: frame.timeMs,
            lastSeq: frame.seq,
            lastSeenMs: frame.timeMs,
          };
          live.push(t);
        }
        return { trackId: t.id, detection, age: t.age, firstSeq: t.firstSeq, firstSeenMs: t.firstSeenMs };
      });
      return { tracks, ended: gone, stale: false };
    },

    flush() {
      const all = live.map(ended);
      live = [];
      return all;
    },

    get size() {
      return live.length;
    },
  };
}
