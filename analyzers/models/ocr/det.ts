import type { Box, RgbImage, TensorData } from '../types.js';
import { resizeRgb } from './crop.js';
import { clamp, connectedComponents, convexHull, dilate2x2, meanInsideQuad, minAreaRect, orderClockwise, unclipRect, type Point, type Quad } from './geometry.js';

export type { Point, Quad } from './geometry.js';
export { convexHull } from './geometry.js';

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
