import { describe, expect, it } from 'vitest';
import { cropRegion, passesFilter, shiftBox } from '../../analyzers/dag/index.js';
import type { Detection } from '../../core/index.js';

const car: Detection = { box: { x1: 100, y1: 300, x2: 200, y2: 400 }, classId: 2, className: 'car', score: 0.7 };
const frame = { width: 800, height: 400 };

describe('edge filters', () => {
  it('passes everything through an empty filter', () => {
    expect(passesFilter(car, {}, frame)).toBe(true);
  });
  it('filters on class, score and the region of the box centre (fractions of the frame)', () => {
    expect(passesFilter(car, { classes: ['car', 'bus'] }, frame)).toBe(true);
    expect(passesFilter(car, { classes: ['person'] }, frame)).toBe(false);
    expect(passesFilter(car, { minScore: 0.7 }, frame)).toBe(true);
    expect(passesFilter(car, { minScore: 0.71 }, frame)).toBe(false);
    // centre (150, 350) is (0.1875, 0.875) of the frame
    expect(passesFilter(car, { region: { x1: 0, y1: 0.5, x2: 0.5, y2: 1 } }, frame)).toBe(true);
    expect(passesFilter(car, { region: { x1: 0.5, y1: 0, x2: 1, y2: 1 } }, frame)).toBe(false);
  });
});

describe('crops', () => {
  it('grows a box by a fraction of its size on each side, in whole pixels, clipped to the image', () => {
    expect(cropRegion({ x1: 10.5, y1: 20.2, x2: 50.5, y2: 40.2 }, 0.1, { x1: 0, y1: 0, x2: 100, y2: 100 })).toEqual({ x1: 6, y1: 18, x2: 55, y2: 43 });
    expect(cropRegion({ x1: 2, y1: 2, x2: 98, y2: 98 }, 0.5, { x1: 0, y1: 0, x2: 100, y2: 100 })).toEqual({ x1: 0, y1: 0, x2: 100, y2: 100 });
  });
  it('moves boxes between crop and frame pixels', () => {
    expect(shiftBox({ x1: 1, y1: 2, x2: 3, y2: 4 }, 10, 20)).toEqual({ x1: 11, y1: 22, x2: 13, y2: 24 });
  });
});
