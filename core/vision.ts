/**
 * What models produce, in the vocabulary apps consume. Analyzers fill these in; apps turn them
 * into rows; neither imports the other.
 */

/** A box in the pixel coordinates of the original frame. */
export interface Box {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

export interface Detection {
  box: Box;
  classId: number;
  /** Label name, e.g. COCO's `car`. */
  className: string;
  score: number;
}

export interface TextLine {
  box: Box;
  text: string;
  score: number;
}

/** One thing a model tells about its input as a whole, e.g. a face's `age` or `gender`. */
export interface Attribute {
  name: string;
  /** As read: `34`, `female`. */
  value: string;
  /** `value` as a number where it is one (an age), else 0. */
  number: number;
  /** The model's confidence in `value`, 0..1. */
  score: number;
}

export type NodeOutput = (
  /** `exit`: where a node with a learned cache answered (docs/learned-caches.md); absent for other nodes. */
  | { kind: 'detections'; detections: Detection[]; exit?: CacheExit }
  | { kind: 'texts'; texts: TextLine[] }
  /**
   * `answeredBy`: where a specialized node's answer came from (thesis ch. 5); absent for other
   * nodes. `features`: a classifier's feature layer for the input, which a specialized model's
   * retrained top layer reads; no row holds it.
   */
  | { kind: 'attributes'; attributes: Attribute[]; answeredBy?: AnsweredBy; features?: Float32Array; exit?: CacheExit }
) & {
  /** The model that made it, where not the node's own: a cheaper variant the plan chose, or an ingest worker's local model. Rows record it (`model`). */
  servedBy?: string;
};

/** Where a node with a learned cache answered: `full` (the whole model ran) or the candidate layer whose cache did. */
export interface CacheExit {
  at: string;
  variant: string;
}

/**
 * Who answered a specialized node: the oracle (exploring, or checking), the cascade's
 * specialized model itself, or the oracle after the specialized model said "other".
 */
export type AnsweredBy = 'oracle' | 'cascade' | 'fall-through';

/** The frame a node output belongs to, without its pixels. */
export interface FrameRef {
  source: string;
  seq: number;
  captureTimeMs: number;
  /** When the scene was recorded, where that is not the capture time (replayed files). */
  mediaTimeMs?: number;
  width: number;
  height: number;
}
