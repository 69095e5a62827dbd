import { describe, expect, it } from 'vitest';
import { createLineCrossing, createTracker, type CrossingEvent, type FrameInfo, type LineConfig } from '../../apps/operators/index.js';
import { ErrorCode, type Detection } from '../../core/index.js';

// A 1000 × 1000 frame: the default margin (0.01 of the diagonal) is 14.1 px.
const frame = (seq: number): FrameInfo => ({ seq, timeMs: seq * 100, width: 1000, height: 1000 });
/** A 100 × 100 box whose bottom-center anchor is (x, bottom). */
const box = (x: number, bottom: number, className = 'car'): Detection => ({
  box: { x1: x - 50, y1: bottom - 100, x2: x + 50, y2: bottom },
  classId: 2,
  className,
  score: 0.9,
});

/** Horizontal line at y = 500 from x = 100 to x = 900, drawn left to right: above is positive. */
const road: LineConfig = {
  name: 'stop-line',
  from: { x: 0.1, y: 0.5 },
  to: { x: 0.9, y: 0.5 },
  directions: { positive: 'northbound', negative: 'southbound' },
};

/** One track's anchor positions (bottom of its box), frame after frame from seq 1; the events it makes. */
function crossings(bottoms: readonly number[], config: LineConfig = road, x = 500): CrossingEvent[] {
  const line = createLineCrossing(config);
  return bottoms.flatMap((bottom, i) => line.update(frame(i + 1), { tracks: [{ trackId: 't', detection: box(x, bottom) }] }));
}

describe('createLineCrossing', () => {
  it('counts two cars going opposite ways over a horizontal line once each, with the direction they go', () => {
    const tracker = createTracker();
    const line = createLineCrossing(road);
    const events: CrossingEvent[] = [];
    // 25 px a frame: car A (x 300) goes down from y 350, car B (x 700) up from y 650.
    for (let k = 0; k < 12; k++) {
      const f = frame(k + 1);
      const tracked = tracker.update(f, [box(300, 350 + 25 * k), box(700, 650 - 25 * k)]);
      events.push(...line.update(f, tracked));
    }
    // Seq 6 is 25 px from the line, seq 7 on it (no side), seq 8 25 px past it.
    expect(events).toEqual([
      { line: 'stop-line', trackId: '1-0', className: 'car', direction: 'southbound', seq: 8, timeMs: 800 },
      { line: 'stop-line', trackId: '1-1', className: 'car', direction: 'northbound', seq: 8, timeMs: 800 },
    ]);
  });

  it('names directions by the side of from → to: drawn right to left, the same motion is the other direction', () => {
    const reversed = { ...road, from: road.to, to: road.from };
    expect(crossings([450, 550]).map((e) => e.direction)).toEqual(['southbound']);
    expect(crossings([450, 550], reversed).map((e) => e.direction)).toEqual(['northbound']);
  });

  it('defaults the direction names to positive and negative', () => {
    const plain = { name: 'l', from: road.from, to: road.to };
    expect(crossings([450, 550, 450], plain).map((e) => e.direction)).toEqual(['negative', 'positive']);
  });

  it.each([
    // anchor y per frame (line at 500, margin 14.1), the directions counted
    { case: 'stays within the margin', path: [495, 505, 498, 510, 490], expected: [] },
    { case: 'wobbles within the margin on its way down', path: [450, 495, 505, 498, 503, 560], expected: ['southbound'] },
    { case: 'waits on the line and goes back', path: [450, 495, 505, 510, 450], expected: [] },
    { case: 'only touches the far margin', path: [450, 514, 450], expected: [] },
    { case: 'crosses, comes back, crosses again', path: [450, 560, 450, 560, 450], expected: ['southbound', 'northbound'] },
    { case: 'starts on the line', path: [500, 560, 440], expected: ['northbound'] },
  ])('a track that $case counts $expected', ({ path, expected }) => {
    expect(crossings(path).map((e) => e.direction)).toEqual(expected);
  });

  it('counts only a path through the segment, not round its end', () => {
    // The line spans x 100..900; at x 950 the path crosses the infinite line only.
    expect(crossings([450, 550], road, 950)).toEqual([]);
    // A diagonal path from (950, 450) to (850, 550) passes through (900, 500), the end point.
    const line = createLineCrossing(road);
    line.update(frame(1), { tracks: [{ trackId: 't', detection: box(950, 450) }] });
    expect(line.update(frame(2), { tracks: [{ trackId: 't', detection: box(850, 550) }] })).toHaveLength(1);
  });

  it('uses the bottom-center anchor by default and the box center when asked', () => {
    // The box bottom goes 450 → 560; its center (50 px higher) 400 → 510, within the margin.
    expect(crossings([450, 560])).toHaveLength(1);
    expect(crossings([450, 560], { ...road, anchor: 'center' })).toHaveLength(0);
  });

  it('forgets ended tracks', () => {
    const line = createLineCrossing(road);
    line.update(frame(1), { tracks: [{ trackId: 't', detection: box(500, 450) }] });
    line.update(frame(2), { tracks: [], ended: [{ trackId: 't' }] });
    expect(line.update(frame(3), { tracks: [{ trackId: 't', detection: box(500, 550) }] })).toEqual([]);
  });

  it('keeps sides per track', () => {
    const line = createLineCrossing(road);
    line.update(frame(1), { tracks: [{ trackId: 'a', detection: box(300, 450) }, { trackId: 'b', detection: box(600, 550) }] });
    const events = line.update(frame(2), { tracks: [{ trackId: 'b', detection: box(600, 560) }, { trackId: 'a', detection: box(300, 560, 'bus') }] });
    expect(events.map((e) => [e.trackId, e.className, e.direction])).toEqual([['a', 'bus', 'southbound']]);
  });

  it('rejects a line without length', () => {
    expect(() => createLineCrossing({ name: 'dot', from: { x: 0.5, y: 0.5 }, to: { x: 0.5, y: 0.5 } })).toThrow(
      expect.objectContaining({ code: ErrorCode.AppInvalid }),
    );
  });
});
