import { describe, expect, it } from 'vitest';
import { createTracker, iou, type FrameInfo, type TrackerOptions, type TrackUpdate } from '../../apps/operators/index.js';
import { ErrorCode, PanoptesError, type Detection } from '../../core/index.js';

// A 1000 × 1000 frame: the diagonal is 1414 px, so the default centroid reach (0.1) is 141 px.
const frame = (seq: number): FrameInfo => ({ seq, timeMs: seq * 100, width: 1000, height: 1000 });
const det = (x: number, y: number, size = 100, className = 'car'): Detection => ({
  box: { x1: x, y1: y, x2: x + size, y2: y + size },
  classId: className === 'car' ? 2 : 0,
  className,
  score: 0.9,
});
const ids = (u: TrackUpdate): string[] => u.tracks.map((t) => t.trackId);

/** Feeds frames seq 1, 2, ... and returns the ids each got. */
function run(options: TrackerOptions, frames: Detection[][]): string[][] {
  const tracker = createTracker(options);
  return frames.map((detections, i) => ids(tracker.update(frame(i + 1), detections)));
}

describe('createTracker', () => {
  it('names a track by the frame and index it started at, and keeps the name while it is matched', () => {
    const tracker = createTracker();
    const first = tracker.update(frame(1), [det(100, 100), det(500, 500)]);
    expect(ids(first)).toEqual(['1-0', '1-1']);
    // Same objects moved a little and listed the other way round; a third appears.
    const second = tracker.update(frame(2), [det(510, 505), det(110, 100), det(800, 100)]);
    expect(ids(second)).toEqual(['1-1', '1-0', '2-2']);
    expect(second.tracks.map((t) => t.age)).toEqual([2, 2, 1]);
    expect(second.tracks.map((t) => t.firstSeenMs)).toEqual([100, 100, 200]);
    expect(second.tracks[0]?.detection).toEqual(det(510, 505));
    expect(second.ended).toEqual([]);
    expect(tracker.size).toBe(3);
  });

  it('keeps the id through a one-frame occlusion', () => {
    expect(run({}, [[det(100, 100)], [], [det(110, 100)]])).toEqual([['1-0'], [], ['1-0']]);
  });

  it.each([
    // missed frames in the gap, id of the detection after it
    { missed: 1, id: '1-0' },
    { missed: 5, id: '1-0' },
    { missed: 6, id: '8-0' },
  ])('after $missed missed frames (maxMissedFrames 5) the next detection nearby is $id', ({ missed, id }) => {
    const frames = [[det(100, 100)], ...Array.from({ length: missed }, () => []), [det(105, 100)]];
    expect(run({ maxMissedFrames: 5 }, frames).at(-1)).toEqual([id]);
  });

  it('reports a track as ended on the frame it is missed for the (maxMissedFrames + 1)th time', () => {
    const tracker = createTracker({ maxMissedFrames: 2 });
    tracker.update(frame(1), [det(100, 100)]);
    tracker.update(frame(2), [det(102, 100)]);
    expect(tracker.update(frame(3), []).ended).toEqual([]);
    expect(tracker.update(frame(4), []).ended).toEqual([]);
    expect(tracker.update(frame(5), []).ended).toEqual([
      { trackId: '1-0', className: 'car', age: 2, firstSeq: 1, firstSeenMs: 100, lastSeq: 2, lastSeenMs: 200, box: det(102, 100).box },
    ]);
    expect(tracker.size).toBe(0);
    expect(ids(tracker.update(frame(6), [det(102, 100)]))).toEqual(['6-0']);
  });

  describe('a small object moving fast: 20 px box, 60 px per frame (no overlap between frames)', () => {
    const frames = [0, 1, 2].map((i) => [det(100 + 60 * i, 500, 20)]);

    it('iou starts a new track every frame, since the boxes never overlap', () => {
      expect(iou(det(100, 500, 20).box, det(160, 500, 20).box)).toBe(0);
      expect(run({ method: 'iou' }, frames)).toEqual([['1-0'], ['2-0'], ['3-0']]);
    });

    it('centroid keeps one track, since 60 px is within 0.1 of the diagonal', () => {
      expect(run({ method: 'centroid' }, frames)).toEqual([['1-0'], ['1-0'], ['1-0']]);
    });

    it('centroid starts a new track when the jump exceeds maxDistance', () => {
      expect(run({ method: 'centroid', maxDistance: 0.04 }, frames)).toEqual([['1-0'], ['2-0'], ['3-0']]);
    });
  });

  it('ignores a frame whose seq is not after the last one, without changing any state', () => {
    const tracker = createTracker();
    tracker.update(frame(5), [det(100, 100)]);
    expect(tracker.update(frame(4), [det(600, 600)])).toEqual({ tracks: [], ended: [], stale: true });
    expect(tracker.update(frame(5), [det(600, 600)])).toEqual({ tracks: [], ended: [], stale: true });
    const next = tracker.update(frame(6), [det(102, 100)]);
    expect(next.stale).toBe(false);
    expect(next.tracks.map((t) => [t.trackId, t.age])).toEqual([['5-0', 2]]);
    expect(tracker.size).toBe(1);
  });

  it('matches the best pair first: the closer of two detections takes the track', () => {
    // Both overlap the track; the second overlaps more (IoU 0.90 vs 0.54), so it keeps the id.
    expect(run({}, [[det(100, 100)], [det(130, 100), det(105, 100)]])).toEqual([['1-0'], ['2-0', '1-0']]);
  });

  it('matches only within a class unless sameClass is false', () => {
    const frames = [[det(100, 100, 100, 'car')], [det(100, 100, 100, 'person')]];
    expect(run({}, frames)).toEqual([['1-0'], ['2-0']]);
    expect(run({ sameClass: false }, frames)).toEqual([['1-0'], ['1-0']]);
  });

  it('gives the same ids and ends on a replay of the same frames', () => {
    const script = [[det(100, 100), det(300, 100)], [det(310, 100)], [], [det(120, 100), det(305, 100)], [], [], [], []];
    const replay = (): TrackUpdate[] => {
      const tracker = createTracker({ maxMissedFrames: 2 });
      return script.map((d, i) => tracker.update(frame(i + 1), d));
    };
    expect(replay()).toEqual(replay());
  });

  it('flush ends every live track', () => {
    const tracker = createTracker();
    tracker.update(frame(1), [det(100, 100), det(500, 500)]);
    expect(tracker.flush().map((t) => t.trackId)).toEqual(['1-0', '1-1']);
    expect(tracker.size).toBe(0);
  });

  it.each([{ minIou: 0 }, { minIou: 1.5 }, { maxDistance: 0 }, { maxMissedFrames: -1 }, { maxMissedFrames: 1.5 }])('rejects %o', (options) => {
    expect(() => createTracker(options)).toThrow(PanoptesError);
    expect(() => createTracker(options)).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
  });
});
