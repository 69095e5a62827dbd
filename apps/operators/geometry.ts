import type { Box } from '../../core/index.js';

/** A point; in frame pixels unless a config says fractions of the frame (0..1). */
export interface Point {
  x: number;
  y: number;
}

/**
 * Which point of a box stands for the object. `bottom-center` is where a car or a person
 * touches the ground, so lines and zones drawn on the road or floor mean what they look like;
 * `center` suits things that do not stand on anything (faces, HUD items).
 */
export type Anchor = 'bottom-center' | 'center';

export function anchorOf(box: Box, anchor: Anchor): Point {
  const x = (box.x1 + box.x2) / 2;
  return { x, y: anchor === 'center' ? (box.y1 + box.y2) / 2 : box.y2 };
}

export function iou(a: Box, b: Box): number {
  const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
  const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
  if (w <= 0 || h <= 0) return 0;
  const inter = w * h;
  const union = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter;
  return union > 0 ? inter / union : 0;
}

export function distance(a: Point, b: Point): number {
  return Math.hypot(a.x - b.x, a.y - b.y);
}

export function toPixels(p: Point, width: number, height: number): Point {
  return { x: p.x * width, y: p.y * height };
}

/**
 * Twice the signed area of triangle (a, b, p). In image coordinates (y down) it is positive when
 * p lies to the left of a→b as seen on screen, negative to the right, 0 on the line.
 */
export function cross(a: Point, b: Point, p: Point): number {
  return (p.x - a.x) * (b.y - a.y) - (p.y - a.y) * (b.x - a.x);
}

/** Whether segments p1–p2 and q1–q2 share a point (touching counts). */
export function segmentsIntersect(p1: Point, p2: Point, q1: Point, q2: Point): boolean {
  const d1 = Math.sign(cross(q1, q2, p1));
  const d2 = Math.sign(cross(q1, q2, p2));
  const d3 = Math.sign(cross(p1, p2, q1));
  const d4 = Math.sign(cross(p1, p2, q2));
  if (d1 * d2 < 0 && d3 * d4 < 0) return true;
  const within = (a: Point, b: Point, p: Point): boolean =>
    Math.min(a.x, b.x) <= p.x && p.x <= Math.max(a.x, b.x) && Math.min(a.y, b.y) <= p.y && p.y <= Math.max(a.y, b.y);
  return (
    (d1 === 0 && within(q1, q2, p1)) ||
    (d2 === 0 && within(q1, q2, p2)) ||
    (d3 === 0 && within(p1, p2, q1)) ||
    (d4 === 0 && within(p1, p2, q2))
  );
}

/**
 * Ray casting: count the polygon edges a ray from p towards +x crosses. Each edge is half-open
 * in y, so a ray through a vertex is counted once and the answer for points on an edge is
 * fixed (the same input always gives the same side), which is all a zone needs.
 */
export function pointInPolygon(p: Point, polygon: readonly Point[]): boolean {
  let inside = false;
  for (let i = 0, j = polygon.length - 1; i < polygon.length; j = i++) {
    const a = polygon[i] as Point;
    const b = polygon[j] as Point;
    if (a.y > p.y !== b.y > p.y && p.x < ((b.x - a.x) * (p.y - a.y)) / (b.y - a.y) + a.x) inside = !inside;
  }
  return inside;
}
