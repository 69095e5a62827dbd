import type { RgbImage, TensorData } from '../types.js';
import { CTC_BLANK_INDEX } from './charset.js';
import { resizeRgb } from './crop.js';

export interface RecPreprocessOptions {
  /** Input height of the recogniser; PP-OCRv3/v4 use 48. */
  height?: number;
  /**
   * The narrowest batch width (PaddleOCR's `rec_image_shape` width, 320): short crops are padded up
   * to it rather than the batch shrinking below it.
   */
  minWidth?: number;
  /**
   * Cap on the batch width. PaddleOCR has none (the width follows the widest crop); a cap bounds
   * the tensor size, and crops wider than it at `height` are squeezed horizontally to fit.
   * @defaultValue 3200 (`MAX_LINE_WIDTH`)
   */
  maxWidth?: number;
}

export interface RecResult {
  text: string;
  /** Mean of the per-step maximum probability over the kept steps; 0 for an empty result. */
  score: number;
}

/**
 * The widest batch, px: a line 66 times as wide as it is high. Without a cap one crop of 16000×1
 * (a JPEG of 2 KB) made every row of its batch 768,000 px wide, 1.8 GB for four.
 */
const MAX_LINE_WIDTH = 3200;

/**
 * Turns text-line crops into one recogniser batch, NCHW float32 `[N, 3, height, W]`, as PaddleOCR's
 * `TextRecognizer.resize_norm_img` does:
 * - `W = floor(height * max(minWidth / height, widest crop's width/height))`, capped at `maxWidth`;
 * - each crop keeps its aspect ratio: resized (bilinear) to `min(W, ceil(height * w / h)) × height`;
 * - channels in **BGR** order (PaddleOCR works on OpenCV's BGR images), values `(x / 255 - 0.5) / 0.5`;
 * - right-padded with 0 (mid-grey after normalisation) up to `W`.
 *
 * An empty (0×0) crop becomes an all-padding row. PaddleOCR also sorts the crops by aspect ratio and
 * runs them in batches of 6 so that the padding stays small; that is the caller's choice.
 */
export function preprocessRec(crops: RgbImage[], options: RecPreprocessOptions = {}): TensorData {
  const { height = 48, minWidth = 320, maxWidth = MAX_LINE_WIDTH } = options;
  if (!Number.isInteger(height) || height <= 0) throw new RangeError(`height must be a positive integer, got ${height}`);

  let maxRatio = minWidth / height;
  for (const crop of crops) {
    if (crop.width > 0 && crop.height > 0) maxRatio = Math.max(maxRatio, crop.width / crop.height);
  }
  let batchWidth = Math.floor(height * maxRatio);
  if (Number.isFinite(maxWidth)) batchWidth = Math.min(batchWidth, Math.floor(maxWidth));
  batchWidth = Math.max(1, batchWidth);

  const plane = height * batchWidth;
  const data = new Float32Array(crops.length * 3 * plane);
  crops.forEach((crop, n) => {
    if (crop.width === 0 || crop.height === 0) return;
    const resizedW = Math.max(1, Math.min(batchWidth, Math.ceil(height * (crop.width / crop.height))));
    const resized = resizeRgb(crop, resizedW, height);
    const base = n * 3 * plane;
    const px = resized.data;
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < resizedW; x++) {
        const s = (y * resizedW + x) * 3;
        const d = base + y * batchWidth + x;
        data[d] = px[s + 2]! / 127.5 - 1; // B
        data[d + plane] = px[s + 1]! / 127.5 - 1; // G
        data[d + 2 * plane] = px[s]! / 127.5 - 1; // R
      }
    }
  });
  return { data, dims: [crops.length, 3, height, batchWidth], type: 'float32' };
}

export interface CtcDecodeOptions {
  /** Index of the CTC blank among the classes; PaddleOCR's is 0. */
  blankIndex?: number;
}

/**
 * Greedy CTC decoding of recogniser output `[N, T, C]` (PaddleOCR's `CTCLabelDecode`): per step
 * take the arg-max class and its probability, drop a step that repeats the previous step's class,
 * drop blanks, map the rest through `charset`. PP-OCR models end in a softmax, so the values are
 * probabilities and the score is their mean over the kept steps.
 *
 * Note a repeat is judged against the previous *step*, not the previous kept character, so
 * `a a` collapses to `a` but `a blank a` gives `aa`.
 */
export function ctcDecode(logits: TensorData, charset: string[], options: CtcDecodeOptions = {}): RecResult[] {
  const { blankIndex = CTC_BLANK_INDEX } = options;
  if (logits.dims.length !== 3) throw new RangeError(`ctcDecode expects [N, T, C], got [${logits.dims.join(', ')}]`);
  const [n = 0, steps = 0, classes = 0] = logits.dims;
  if (classes !== charset.length) {
    throw new RangeError(`ctcDecode: the model has ${classes} classes but the charset has ${charset.length} entries`);
  }
  const values = logits.data;
  if (values instanceof BigInt64Array) throw new TypeError('ctcDecode: int64 output is not supported');
  if (values.length < n * steps * classes) throw new RangeError('ctcDecode: data is shorter than its dims');

  const results: RecResult[] = [];
  for (let b = 0; b < n; b++) {
    let text = '';
    let sum = 0;
    let kept = 0;
    let previous = -1;
    for (let t = 0; t < steps; t++) {
      const offset = (b * steps + t) * classes;
      let best = 0;
      let bestValue = values[offset]!;
      for (let c = 1; c < classes; c++) {
        const v = values[offset + c]!;
        if (v > bestValue) {
          bestValue = v;
          best = c;
        }
      }
      if (best !== blankIndex && best !== previous) {
        text += charset[best]!;
        sum += bestValue;
        kept++;
      }
      previous = best;
    }
    results.push({ text, score: kept > 0 ? sum / kept : 0 });
  }
  return results;
}
