import type { Box, Detection } from '../types.js';

/** Area of a box in continuous pixel coordinates (`x2 - x1` wide); 0 for an empty or inverted box. */
export function boxArea(b: Box): number {
  return Math.max(0, b.x2 - b.x1) * Math.max(0, b.y2 - b.y1);
}

/** Intersection over union of two boxes; 0 when both are empty. */
export function iou(a: Box, b: Box): number {
  const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
  const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
  if (w <= 0 || h <= 0) return 0;
  const inter = w * h;
  const union = boxArea(a) + boxArea(b) - inter;
  return union > 0 ? inter / union : 0;
}

export interface NmsOptions {
  /** A box is dropped when its IoU with a kept box of the same class is above this. */
  iouThreshold: number;
  /** Keep at most this many boxes in all (default: no limit). */
  maxDetections?: number;
  /** Compare boxes across classes too (default false: class-wise). */
  classAgnostic?: boolean;
}

/**
 * Greedy non-maximum suppression: visit boxes by decreasing score (ties keep input order), keep a
 * box unless a kept box of the same class (any class with `classAgnostic`) overlaps it with IoU
 * above `iouThreshold`. Returns the kept detections sorted by decreasing score; the input is not
 * modified.
 */
export function nms(detections: readonly Detection[], options: NmsOptions): Detection[] {
  const { iouThreshold, classAgnostic = false } = options;
  const limit = options.maxDetections ?? Number.POSITIVE_INFINITY;
  const order = detections.map((d, i) => ({ d, i }));
  order.sort((a, b) => b.d.score - a.d.score || a.i - b.i);
  const kept: Detection[] = [];
  for (const { d } of order) {
    if (kept.length >= limit) break;
    let suppressed = false;
    for (const k of kept) {
      if ((classAgnostic || k.classId === d.classId) && iou(k.box, d.box) > iouThreshold) {
        suppressed = true;
        break;
      }
    }
    if (!suppressed) kept.push(d);
  }
  return kept;
}

/**
 * Whether two frames' detections name the same objects: as many of each, every one matched to
 * its own counterpart of the same class with IoU ≥ `minIou`. A detector cache's hit is right when
 * the frame it answers for and the frame it reuses agree this way.
 */
export function sameObjects(a: readonly Detection[], b: readonly Detection[], minIou = 0.5): boolean {
  return a.length === b.length && matchedObjects(a, b, minIou) === a.length;
}

/**
 * How many of `a`'s detections find a counterpart of their own in `b`: same class, IoU ≥ `minIou`,
 * each taking the best-overlapping one still unmatched, in `a`'s order (highest score first).
 */
export function matchedObjects(a: readonly Detection[], b: readonly Detection[], minIou = 0.5): number {
  const unmatched = [...b];
  let matched = 0;
  for (const d of a) {
    let best = -1;
    let bestIou = minIou;
    unmatched.forEach((e, i) => {
      const overlap = e.className === d.className ? iou(d.box, e.box) : 0;
      if (overlap >= bestIou) [best, bestIou] = [i, overlap];
    });
    if (best < 0) continue;
    unmatched.splice(best, 1);
    matched++;
  }
  return matched;
}
