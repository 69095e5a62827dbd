/**
 * The geometry of PP-OCR's DB post-processing (`./det.ts`): components of a binary map, convex
 * hulls, minimum-area rectangles, their unclipping and scoring, as PaddleOCR does them with
 * OpenCV and pyclipper.
 */

/** A point `[x, y]` in pixels. */
export type Point = [number, number];

/** Four corners in clockwise order from the top-left: `[tl, tr, br, bl]`. */
export type Quad = [Point, Point, Point, Point];

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
export function minAreaRect(hull: Point[]): Rect {
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
export function unclipRect(rect: Rect, ratio: number): Rect {
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
export function meanInsideQuad(prob: ArrayLike<number>, w: number, h: number, quad: Quad): number {
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
export function connectedComponents(bitmap: Uint8Array, w: number, h: number): Point[][] {
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

export function dilate2x2(mask: Uint8Array, w: number, h: number): Uint8Array {
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
export function orderClockwise(points: Point[]): Quad {
  const byX = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const [l0, l1, r0, r1] = byX as Quad;
  const [tl, bl] = l0[1] <= l1[1] ? [l0, l1] : [l1, l0];
  const [tr, br] = r0[1] <= r1[1] ? [r0, r1] : [r1, r0];
  return [tl, tr, br, bl];
}

export function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
