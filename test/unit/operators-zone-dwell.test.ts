import { describe, expect, it } from 'vitest';
import { createTracker, createZoneDwell, pointInPolygon, type FrameInfo, type Visit, type ZoneConfig } from '../../apps/operators/index.js';
import { ErrorCode, type Detection } from '../../core/index.js';

// 1000 × 1000 frames, one a second: seq n is at n s.
const frame = (seq: number): FrameInfo => ({ seq, timeMs: seq * 1000, width: 1000, height: 1000 });
/** A 50 × 100 person whose feet (bottom-center anchor) are at (x, y). */
const person = (x: number, y: number): Detection => ({
  box: { x1: x - 25, y1: y - 100, x2: x + 25, y2: y },
  classId: 0,
  className: 'person',
  score: 0.8,
});
const at = (trackId: string, x: number, y: number): { trackId: string; detection: Detection } => ({ trackId, detection: person(x, y) });

/** The square 250..750 px in both axes. */
const shelf: ZoneConfig = { name: 'shelf', polygon: [{ x: 0.25, y: 0.25 }, { x: 0.75, y: 0.25 }, { x: 0.75, y: 0.75 }, { x: 0.25, y: 0.75 }] };

describe('createZoneDwell', () => {
  it('a person entering at 1 s and leaving at 4 s dwells 3000 ms', () => {
    const zone = createZoneDwell(shelf);
    const path: [number, number][] = [[100, 500], [300, 500], [400, 500], [500, 500], [900, 500]];
    const updates = path.map(([x, y], seq) => zone.update(frame(seq), { tracks: [at('p', x, y)] }));
    expect(updates.map((u) => u.inside)).toEqual([0, 1, 1, 1, 0]);
    expect(updates.flatMap((u) => u.visits)).toEqual([
      { zone: 'shelf', trackId: 'p', className: 'person', enterMs: 1000, enterSeq: 1, exitMs: 4000, exitSeq: 4, dwellMs: 3000, frames: 3 },
    ]);
    expect(zone.flush()).toEqual([]);
  });

  it('closes a person lost inside the zone at their last sighting, on the frame the tracker ends them', () => {
    const tracker = createTracker({ maxMissedFrames: 2 });
    const zone = createZoneDwell(shelf);
    const seen = [[person(240, 500)], [person(260, 500)], [person(270, 500)], [], [], []];
    const visits = seen.map((detections, seq) => zone.update(frame(seq), tracker.update(frame(seq), detections)).visits);
    // Outside at 0 s (x 240, the zone starts at 250), seen inside at 1 s and 2 s, missed at 3, 4
    // and 5 s: the third miss ends the track.
    expect(visits).toEqual([[], [], [], [], [], [
      { zone: 'shelf', trackId: '0-0', className: 'person', enterMs: 1000, enterSeq: 1, exitMs: 2000, exitSeq: 2, dwellMs: 1000, frames: 2 },
    ]]);
  });

  it('flush closes the stays still open at the end of the stream, in the order they began', () => {
    const zone = createZoneDwell(shelf);
    zone.update(frame(1), { tracks: [at('b', 600, 600)] });
    zone.update(frame(2), { tracks: [at('a', 300, 300), at('b', 610, 600)] });
    zone.update(frame(3), { tracks: [at('a', 310, 300)] });
    expect(zone.flush().map((v: Visit) => [v.trackId, v.enterMs, v.exitMs, v.dwellMs, v.frames])).toEqual([
      ['b', 1000, 2000, 1000, 2],
      ['a', 2000, 3000, 1000, 2],
    ]);
    expect(zone.flush()).toEqual([]);
  });

  it('counts the tracks inside in each frame and gives a new visit for each stay', () => {
    const zone = createZoneDwell(shelf);
    const frames = [
      [at('a', 500, 500), at('b', 100, 100)],
      [at('a', 500, 500), at('b', 500, 600)],
      [at('a', 900, 500), at('b', 500, 600)],
      [at('a', 500, 500)],
      [at('a', 900, 500)],
    ];
    const updates = frames.map((tracks, i) => zone.update(frame(i + 1), { tracks }));
    expect(updates.map((u) => u.inside)).toEqual([1, 2, 1, 1, 0]);
    expect(updates.flatMap((u) => u.visits).map((v) => [v.trackId, v.enterSeq, v.exitSeq])).toEqual([
      ['a', 1, 3],
      ['a', 4, 5],
    ]);
  });

  it('uses the feet by default and the box center when asked', () => {
    // Feet at y 780 (below the zone), center at y 730 (inside).
    expect(createZoneDwell(shelf).update(frame(1), { tracks: [at('p', 500, 780)] }).inside).toBe(0);
    expect(createZoneDwell({ ...shelf, anchor: 'center' }).update(frame(1), { tracks: [at('p', 500, 780)] }).inside).toBe(1);
  });

  it('rejects a polygon with fewer than 3 corners', () => {
    expect(() => createZoneDwell({ name: 'z', polygon: [{ x: 0, y: 0 }, { x: 1, y: 1 }] })).toThrow(expect.objectContaining({ code: ErrorCode.AppInvalid }));
  });
});

describe('pointInPolygon', () => {
  // An L: the square 0..10 without its top-right quarter 5..10 × 0..5.
  const ell = [{ x: 0, y: 0 }, { x: 5, y: 0 }, { x: 5, y: 5 }, { x: 10, y: 5 }, { x: 10, y: 10 }, { x: 0, y: 10 }];
  it.each([
    { x: 2, y: 2, inside: true },
    { x: 7, y: 7, inside: true },
    { x: 7, y: 2, inside: false },
    { x: 11, y: 7, inside: false },
    { x: -1, y: 5, inside: false },
    // On the ray through the vertex (5, 5): counted once, not twice.
    { x: 2, y: 5, inside: true },
    { x: 7, y: 5, inside: true },
  ])('($x, $y) inside the L: $inside', ({ x, y, inside }) => {
    expect(pointInPolygon({ x, y }, ell)).toBe(inside);
  });
});
