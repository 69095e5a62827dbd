import type { Box, RgbImage, TensorData } from '../types.js';
import { resizeRgb } from './crop.js';
import type { Point, Quad } from './geometry.js';

export type { Point, Quad } from './geometry.js';

/** A detected text region in the pixel coordinates of the original image. */
export interface TextBox {
  /** Axis-aligned bounds of `points` (edges, so `x2 - x1` is the width). */
  box: Box;
  /** The (possibly rotated) minimum-area rectangle around the text, after unclipping. */
  points: Quad;
  /** Mean text probability inside the rectangle before unclipping. */
  score: number;
}

export interface DetPreprocessOptions {
  /** PaddleOCR `det_limit_side_len`; 960 for PP-OCR inference. */
  limitSideLen?: number;
  /**
   * PaddleOCR `det_limit_type`: `max` shrinks so the longer side is at most `limitSideLen` (never
   * enlarges; the PP-OCR default), `min` enlarges so the shorter side is at least `limitSideLen`,
   * `resize_long` scales the longer side to exactly `limitSideLen`.
   */
  limitType?: 'max' | 'min' | 'resize_long';
  /** Hard cap on the longer resized side (PaddleOCR `max_side_limit`, 4000). */
  maxSideLimit?: number;
}

/** How the original image maps onto the detector input: `input = original * scale`. */
export interface DetGeometry {
  scaleX: number;
  scaleY: number;
  /** Size of the original image. */
  width: number;
  height: number;
}

export interface DetInput extends DetGeometry {
  /** NCHW float32 `[1, 3, H, W]`, H and W multiples of 32. */
  input: TensorData;
}

/** ImageNet statistics in the channel order of the tensor: B, G, R (see {@link preprocessDet}). */
const DET_MEAN_BGR = [0.485, 0.456, 0.406] as const;
const DET_STD_BGR = [0.229, 0.224, 0.225] as const;

/**
 * Prepares an image for the PP-OCR DB detector, as PaddleOCR's `DetResizeForTest` (type 0) +
 * `NormalizeImage` + `ToCHWImage` do in `tools/infer/predict_det.py`:
 * - an image whose width + height < 64 is first padded with black (bottom/right) to at least 32×32;
 * - scale by the ratio `limitType` gives, truncate to integers, round each side to the nearest
 *   multiple of 32 (at least 32) and resize bilinearly (both axes independently, so the aspect ratio
 *   shifts slightly: `scaleX` and `scaleY` differ);
 * - channels in **BGR** order, since PaddleOCR feeds OpenCV's BGR images, normalised
 *   `(x / 255 - mean) / std` with mean `[0.485, 0.456, 0.406]` and std `[0.229, 0.224, 0.225]`
 *   applied in that (B, G, R) order — the statistics are applied to the array as it is, BGR.
 */
export function preprocessDet(image: RgbImage, options: DetPreprocessOptions = {}): DetInput {
  const { limitSideLen = 960, limitType = 'max', maxSideLimit = 4000 } = options;
  if (image.width <= 0 || image.height <= 0) throw new RangeError('preprocessDet: empty image');

  const src = image.width + image.height < 64 ? padTo(image, Math.max(32, image.width), Math.max(32, image.height)) : image;
  const h = src.height;
  const w = src.width;

  let ratio = 1;
  if (limitType === 'max') {
    if (Math.max(h, w) > limitSideLen) ratio = limitSideLen / Math.max(h, w);
  } else if (limitType === 'min') {
    if (Math.min(h, w) < limitSideLen) ratio = limitSideLen / Math.min(h, w);
  } else {
    ratio = limitSideLen / Math.max(h, w);
  }
  let resizeH = Math.trunc(h * ratio);
  let resizeW = Math.trunc(w * ratio);
  if (Math.max(resizeH, resizeW) > maxSideLimit) {
    const r = maxSideLimit / Math.max(resizeH, resizeW);
    resizeH = Math.trunc(resizeH * r);
    resizeW = Math.trunc(resizeW * r);
  }
  resizeH = Math.max(roundHalfEven(resizeH / 32) * 32, 32);
  resizeW = Math.max(roundHalfEven(resizeW / 32) * 32, 32);

  const resized = resizeRgb(src, resizeW, resizeH);
  const plane = resizeW * resizeH;
  const data = new Float32Array(3 * plane);
  const px = resized.data;
  // Tensor channel c holds BGR channel c, i.e. RGB channel 2 - c.
  for (let c = 0; c < 3; c++) {
    const mul = 1 / (255 * DET_STD_BGR[c as 0 | 1 | 2]);
    const add = -DET_MEAN_BGR[c as 0 | 1 | 2] / DET_STD_BGR[c as 0 | 1 | 2];
    const rgb = 2 - c;
    const out = c * plane;
    for (let i = 0; i < plane; i++) data[out + i] = px[i * 3 + rgb]! * mul + add;
  }

  return {
    input: { data, dims: [1, 3, resizeH, resizeW], type: 'float32' },
    scaleX: resizeW / w,
    scaleY: resizeH / h,
    width: image.width,
    height: image.height,
  };
}

export interface DetDecodeOptions {
  /** Pixel threshold on the probability map (PaddleOCR `det_db_thresh`). */
  threshold?: number;
  /** Minimum mean probability inside a box (`det_db_box_thresh`). */
  boxThreshold?: number;
  /** How far to grow a box: by `area * unclipRatio / perimeter` (`det_db_unclip_ratio`). */
  unclipRatio?: number;
  /** Minimum short side in probability-map pixels before unclipping (`min_size`, 3); `+ 2` after. */
  minSize?: number;
  /** Components beyond this many are ignored (`max_candidates`). */
  maxCandidates?: number;
  /** Dilate the binary map with a 2×2 kernel first (`use_dilation`). */
  dilate?: boolean;
  /** Which image of a batched map to decode. */
  batchIndex?: number;
}

/**
 * DB post-processing of a PP-OCR detector output (PaddleOCR `DBPostProcess`, quad boxes, `fast`
 * score, then `TextDetector.filter_tag_det_res` and `sorted_boxes`):
 * 1. binarise `prob > threshold`;
 * 2. 8-connected components (standing in for `cv2.findContours`' outer contours; holes inside a
 *    component give no box here);
 * 3. the minimum-area (rotated) rectangle around each component's pixel centres (rotating calipers
 *    over the convex hull, like `cv2.minAreaRect`), dropped if its short side < `minSize`;
 * 4. score = mean probability over the pixels inside that rectangle, dropped if < `boxThreshold`;
 * 5. unclip: grow the rectangle by `d = area * unclipRatio / perimeter` on every side (what the
 *    round-joined polygon offset of PaddleOCR gives for a rectangle once re-fitted with a rectangle),
 *    dropped if its short side < `minSize + 2`; corners rounded to whole map pixels as pyclipper's
 *    integer offset does;
 * 6. map to original pixels (`/ scale`, rounded, clipped to the image), order the corners clockwise,
 *    drop boxes with a side of 3 px or less, sort in reading order (top to bottom, then left to right
 *    for boxes whose tops are within 10 px).
 *
 * `probMap` is `[N, 1, H, W]`, `[N, H, W]` or `[H, W]`; `geometry` is what {@link preprocessDet}
 * returned (its `DetInput` can be passed as is).
 */
export function decodeDet(probMap: TensorData, geometry: DetGeometry, options: DetDecodeOptions = {}): TextBox[] {
  const {
    threshold = 0.3,
    boxThreshold = 0.6,
    unclipRatio = 1.5,
    minSize = 3,
    maxCandidates = 1000,
    dilate = false,
    batchIndex = 0,
  } = options;

  const dims = probMap.dims;
  if (dims.length < 2 || dims.length > 4) throw new RangeError(`decodeDet: unexpected dims [${dims.join(', ')}]`);
  if (dims.length === 4 && dims[1] !== 1) throw new RangeError(`decodeDet: expected one channel, got dims [${dims.join(', ')}]`);
  const mapH = dims[dims.length - 2]!;
  const mapW = dims[dims.length - 1]!;
  const values = probMap.data;
  if (values instanceof BigInt64Array) throw new TypeError('decodeDet: int64 maps are not supported');
  const offset = batchIndex * mapH * mapW;
  if (values.length < offset + mapH * mapW) throw new RangeError('decodeDet: data is shorter than its dims');
  const prob = values.subarray(offset, offset + mapH * mapW);

  const mask = new Uint8Array(mapH * mapW);
  for (let i = 0; i < mask.length; i++) mask[i] = prob[i]! > threshold ? 1 : 0;
  const bitmap = dilate ? dilate2x2(mask, mapW, mapH) : mask;

  const components = connectedComponents(bitmap, mapW, mapH).slice(0, maxCandidates);
  const boxes: TextBox[] = [];
  for (const points of components) {
    const rect = minAreaRect(convexHull(points));
    if (Math.min(rect.width, rect.height) < minSize) continue;
    const score = meanInsideQuad(prob, mapW, mapH, rect.corners);
    if (score < boxThreshold) continue;

    const grown = unclipRect(rect, unclipRatio);
    if (Math.min(grown.width, grown.height) < minSize + 2) continue;

    // PaddleOCR's offset (pyclipper) works on integers: its vertices land on whole map pixels.
    const mapped = grown.corners.map(
      ([x, y]): Point => [
        clamp(Math.round(roundAway(x) / geometry.scaleX), 0, geometry.width),
        clamp(Math.round(roundAway(y) / geometry.scaleY), 0, geometry.height),
      ],
    );
    const quad = orderClockwise(mapped);
    const rectWidth = Math.trunc(dist(quad[0], quad[1]));
    const rectHeight = Math.trunc(dist(quad[0], quad[3]));
    if (rectWidth <= 3 || rectHeight <= 3) continue;
    boxes.push({ box: boundsOf(quad), points: quad, score });
  }
  return sortReadingOrder(boxes);
}

// ---------------------------------------------------------------------------------------------
// Geometry helpers.

interface Rect {
  /** Corners in order around the rectangle. */
  corners: Quad;
  center: Point;
  /** Side along `axis`. */
  width: number;
  /** Side perpendicular to `axis`. */
  height: number;
  /** Unit vector along the `width` side. */
  axis: Point;
}

/** Convex hull (Andrew's monotone chain), counter-clockwise in y-down pixel coordinates, no collinear points. */
export function convexHull(points: Point[]): Point[] {
  const pts = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  if (pts.length <= 2) return pts;
  const cross = (o: Point, a: Point, b: Point) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
  const lower: Point[] = [];
  for (const p of pts) {
    while (lower.length >= 2 && cross(lower[lower.length - 2]!, lower[lower.length - 1]!, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = pts.length - 1; i >= 0; i--) {
    const p = pts[i]!;
    while (upper.length >= 2 && cross(upper[upper.length - 2]!, upper[upper.length - 1]!, p) <= 0) upper.pop();
    upper.push(p);
  }
  lower.pop();
  upper.pop();
  return lower.concat(upper);
}

/** Minimum-area enclosing rectangle of a convex polygon (rotating calipers over its edges). */
function minAreaRect(hull: Point[]): Rect {
  const first = hull[0];
  if (!first) throw new RangeError('minAreaRect: no points');
  if (hull.length === 1) {
    return { corners: [first, first, first, first], center: first, width: 0, height: 0, axis: [1, 0] };
  }

  let best: { area: number; axis: Point; minU: number; maxU: number; minV: number; maxV: number } | undefined;
  for (let i = 0; i < hull.length; i++) {
    const a = hull[i]!;
    const b = hull[(i + 1) % hull.length]!;
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (len === 0) continue;
    const ux = (b[0] - a[0]) / len;
    const uy = (b[1] - a[1]) / len;
    let minU = Infinity;
    let maxU = -Infinity;
    let minV = Infinity;
    let maxV = -Infinity;
    for (const [x, y] of hull) {
      const u = x * ux + y * uy;
      const v = -x * uy + y * ux;
      if (u < minU) minU = u;
      if (u > maxU) maxU = u;
      if (v < minV) minV = v;
      if (v > maxV) maxV = v;
    }
    const area = (maxU - minU) * (maxV - minV);
    if (!best || area < best.area - 1e-9) best = { area, axis: [ux, uy], minU, maxU, minV, maxV };
  }
  if (!best) throw new RangeError('minAreaRect: degenerate input');

  const [ux, uy] = best.axis;
  const toXY = (u: number, v: number): Point => [u * ux - v * uy, u * uy + v * ux];
  const corners: Quad = [
    toXY(best.minU, best.minV),
    toXY(best.maxU, best.minV),
    toXY(best.maxU, best.maxV),
    toXY(best.minU, best.maxV),
  ];
  return {
    corners,
    center: toXY((best.minU + best.maxU) / 2, (best.minV + best.maxV) / 2),
    width: best.maxU - best.minU,
    height: best.maxV - best.minV,
    axis: best.axis,
  };
}

/** Grows a rectangle by `area * ratio / perimeter` on every side. */
function unclipRect(rect: Rect, ratio: number): Rect {
  const perimeter = 2 * (rect.width + rect.height);
  const d = perimeter > 0 ? (rect.width * rect.height * ratio) / perimeter : 0;
  const width = rect.width + 2 * d;
  const height = rect.height + 2 * d;
  const [ux, uy] = rect.axis;
  const [cx, cy] = rect.center;
  const hw = width / 2;
  const hh = height / 2;
  // u along the axis, v perpendicular (-uy, ux), as in minAreaRect.
  const at = (su: number, sv: number): Point => [cx + su * hw * ux - sv * hh * uy, cy + su * hw * uy + sv * hh * ux];
  return { corners: [at(-1, -1), at(1, -1), at(1, 1), at(-1, 1)], center: rect.center, width, height, axis: rect.axis };
}

/**
 * Mean of `prob` over the pixels whose centres lie inside the quad (PaddleOCR `box_score_fast`:
 * vertices truncated to integers, boundary pixels included).
 */
function meanInsideQuad(prob: ArrayLike<number>, w: number, h: number, quad: Quad): number {
  const pts = quad.map(([x, y]): Point => [Math.trunc(x), Math.trunc(y)]);
  const xs = quad.map((p) => p[0]);
  const ys = quad.map((p) => p[1]);
  const xmin = clamp(Math.floor(Math.min(...xs)), 0, w - 1);
  const xmax = clamp(Math.ceil(Math.max(...xs)), 0, w - 1);
  const ymin = clamp(Math.floor(Math.min(...ys)), 0, h - 1);
  const ymax = clamp(Math.ceil(Math.max(...ys)), 0, h - 1);

  // Signed area tells the winding; a pixel is inside when it is on the inner side of every edge
  // (or within half a pixel outside it, which is what rasterising the outline adds).
  let area2 = 0;
  for (let i = 0; i < 4; i++) {
    const a = pts[i]!;
    const b = pts[(i + 1) % 4]!;
    area2 += a[0] * b[1] - b[0] * a[1];
  }
  const sign = area2 >= 0 ? 1 : -1;
  const edges = pts.map((a, i) => {
    const b = pts[(i + 1) % 4]!;
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    return { a, dx: b[0] - a[0], dy: b[1] - a[1], len };
  });

  let sum = 0;
  let count = 0;
  for (let y = ymin; y <= ymax; y++) {
    for (let x = xmin; x <= xmax; x++) {
      let inside = true;
      for (const e of edges) {
        if (e.len === 0) continue;
        const cross = (e.dx * (y - e.a[1]) - e.dy * (x - e.a[0])) * sign;
        if (cross < -0.5 * e.len) {
          inside = false;
          break;
        }
      }
      if (inside) {
        sum += prob[y * w + x]!;
        count++;
      }
    }
  }
  return count > 0 ? sum / count : 0;
}

/**
 * 8-connected components of a binary map, each as the pixel centres at the two ends of its
 * horizontal runs (enough for the convex hull). Labelled run by run with union-find.
 */
function connectedComponents(bitmap: Uint8Array, w: number, h: number): Point[][] {
  const runY: number[] = [];
  const runStart: number[] = [];
  const runEnd: number[] = [];
  const parent: number[] = [];
  const find = (i: number): number => {
    let r = i;
    while (parent[r]! !== r) r = parent[r]!;
    while (parent[i]! !== r) {
      const next = parent[i]!;
      parent[i] = r;
      i = next;
    }
    return r;
  };

  let prevFirst = 0;
  let prevCount = 0;
  for (let y = 0; y < h; y++) {
    const rowFirst = runY.length;
    let x = 0;
    const row = y * w;
    while (x < w) {
      if (bitmap[row + x] === 0) {
        x++;
        continue;
      }
      const s = x;
      while (x < w && bitmap[row + x] !== 0) x++;
      const e = x - 1;
      const id = runY.length;
      runY.push(y);
      runStart.push(s);
      runEnd.push(e);
      parent.push(id);
      // 8-connectivity: runs on the previous row touching [s - 1, e + 1].
      for (let j = prevFirst; j < prevFirst + prevCount; j++) {
        if (runStart[j]! <= e + 1 && runEnd[j]! >= s - 1) {
          const a = find(j);
          const b = find(id);
          if (a !== b) parent[Math.max(a, b)] = Math.min(a, b);
        }
      }
    }
    prevFirst = rowFirst;
    prevCount = runY.length - rowFirst;
  }

  const byRoot = new Map<number, Point[]>();
  for (let i = 0; i < runY.length; i++) {
    const root = find(i);
    let pts = byRoot.get(root);
    if (!pts) {
      pts = [];
      byRoot.set(root, pts);
    }
    pts.push([runStart[i]!, runY[i]!]);
    if (runEnd[i]! !== runStart[i]!) pts.push([runEnd[i]!, runY[i]!]);
  }
  return [...byRoot.values()];
}

function dilate2x2(mask: Uint8Array, w: number, h: number): Uint8Array {
  const out = new Uint8Array(mask.length);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      out[i] =
        mask[i]! | (x > 0 ? mask[i - 1]! : 0) | (y > 0 ? mask[i - w]! : 0) | (x > 0 && y > 0 ? mask[i - w - 1]! : 0);
    }
  }
  return out;
}

/** `[tl, tr, br, bl]`: the two leftmost points split by y into tl/bl, the two rightmost into tr/br. */
function orderClockwise(points: Point[]): Quad {
  const byX = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const [l0, l1, r0, r1] = byX as Quad;
  const [tl, bl] = l0[1] <= l1[1] ? [l0, l1] : [l1, l0];
  const [tr, br] = r0[1] <= r1[1] ? [r0, r1] : [r1, r0];
  return [tl, tr, br, bl];
}

/** PaddleOCR `sorted_boxes`: by top-left (y, x), then boxes on one line (tops within 10 px) left to right. */
function sortReadingOrder(boxes: TextBox[]): TextBox[] {
  const sorted = [...boxes].sort((a, b) => a.points[0][1] - b.points[0][1] || a.points[0][0] - b.points[0][0]);
  for (let i = 0; i < sorted.length - 1; i++) {
    for (let j = i; j >= 0; j--) {
      const a = sorted[j]!;
      const b = sorted[j + 1]!;
      if (Math.abs(b.points[0][1] - a.points[0][1]) < 10 && b.points[0][0] < a.points[0][0]) {
        sorted[j] = b;
        sorted[j + 1] = a;
      } else {
        break;
      }
    }
  }
  return sorted;
}

function boundsOf(points: Point[]): Box {
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  return { x1: Math.min(...xs), y1: Math.min(...ys), x2: Math.max(...xs), y2: Math.max(...ys) };
}

function padTo(image: RgbImage, width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < image.height; y++) {
    data.set(image.data.subarray(y * image.width * 3, (y + 1) * image.width * 3), y * width * 3);
  }
  return { width, height, data };
}

/** Clipper's `Round`: halves away from zero. */
function roundAway(v: number): number {
  return v < 0 ? -Math.round(-v) : Math.round(v);
}

function roundHalfEven(v: number): number {
  const f = Math.floor(v);
  const diff = v - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function dist(a: Point, b: Point): number {
  return Math.hypot(a[0] - b[0], a[1] - b[1]);
}

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
