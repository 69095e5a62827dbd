/** A point `[x, y]` in pixels. */
export type Point = [number, number];

/** Four corners in clockwise order from the top-left: `[tl, tr, br, bl]`. */
export type Quad = [Point, Point, Point, Point];
