import { ErrorCode, PanoptesError } from '../../../core/index.js';
import { isJpeg, placeImage, type ImageInput, type Placement } from '../../image/index.js';
import type { Box, Letterbox, RgbImage, TensorData } from '../types.js';

/**
 * Letterboxing: scale the image by one factor to fit inside the model input, centre it, pad the
 * rest. `model = original * scale + pad`. The pads are exact (possibly fractional) so that the
 * original size can be recovered from the letterbox alone (`sourceSize`), which decoders need to
 * clip boxes; a model pixel holds image content when its centre falls inside the scaled image.
 */
export function letterboxFor(width: number, height: number, inputWidth: number, inputHeight: number): Letterbox {
  if (!(width > 0 && height > 0 && inputWidth > 0 && inputHeight > 0)) {
    throw new RangeError(`letterbox: sizes must be positive, got ${width}x${height} into ${inputWidth}x${inputHeight}`);
  }
  const scale = Math.min(inputWidth / width, inputHeight / height);
  return {
    scale,
    padX: (inputWidth - width * scale) / 2,
    padY: (inputHeight - height * scale) / 2,
    inputWidth,
    inputHeight,
  };
}

/** The original image size a letterbox was made for (exact for letterboxes from `letterboxFor`). */
export function sourceSize(lb: Letterbox): { width: number; height: number } {
  return {
    width: Math.round((lb.inputWidth - 2 * lb.padX) / lb.scale),
    height: Math.round((lb.inputHeight - 2 * lb.padY) / lb.scale),
  };
}

/** Original pixel coordinates -> model input coordinates. */
export function boxToInput(b: Box, lb: Letterbox): Box {
  return {
    x1: b.x1 * lb.scale + lb.padX,
    y1: b.y1 * lb.scale + lb.padY,
    x2: b.x2 * lb.scale + lb.padX,
    y2: b.y2 * lb.scale + lb.padY,
  };
}

/** Model input coordinates -> original pixel coordinates (not clipped). */
export function boxToSource(b: Box, lb: Letterbox): Box {
  return {
    x1: (b.x1 - lb.padX) / lb.scale,
    y1: (b.y1 - lb.padY) / lb.scale,
    x2: (b.x2 - lb.padX) / lb.scale,
    y2: (b.y2 - lb.padY) / lb.scale,
  };
}

export function clipBox(b: Box, width: number, height: number): Box {
  const cx = (v: number): number => Math.min(width, Math.max(0, v));
  const cy = (v: number): number => Math.min(height, Math.max(0, v));
  return { x1: cx(b.x1), y1: cy(b.y1), x2: cx(b.x2), y2: cy(b.y2) };
}

/**
 * Resampling weights along one axis: for each model pixel with content, the source pixels it reads
 * and their weights. A triangle (bilinear) filter on pixel centres, widened by 1/scale when
 * shrinking so every source pixel contributes (no aliasing); for enlarging it is plain bilinear with
 * half-pixel centres and clamped edges.
 */
interface AxisWeights {
  /** First and one-past-last model pixel that hold image content. */
  first: number;
  end: number;
  taps: number;
  /** Per content pixel: first source index; weights[k * taps + j] applies to source start + j. */
  start: Int32Array;
  weights: Float32Array;
}

function axisWeights(srcLen: number, dstLen: number, pad: number, scale: number): AxisWeights {
  const support = Math.max(1, 1 / scale);
  const taps = Math.ceil(2 * support) + 1;
  let first = dstLen;
  let end = 0;
  for (let o = 0; o < dstLen; o++) {
    const s = (o + 0.5 - pad) / scale;
    if (s >= 0 && s < srcLen) {
      first = Math.min(first, o);
      end = o + 1;
    }
  }
  const n = Math.max(0, end - first);
  const start = new Int32Array(n);
  const weights = new Float32Array(n * taps);
  for (let k = 0; k < n; k++) {
    const s = (first + k + 0.5 - pad) / scale;
    const lo = Math.max(0, Math.ceil(s - support - 0.5));
    const hi = Math.min(srcLen - 1, Math.floor(s + support - 0.5));
    start[k] = lo;
    let sum = 0;
    for (let i = lo; i <= hi && i - lo < taps; i++) {
      const w = Math.max(0, 1 - Math.abs(i + 0.5 - s) / support);
      weights[k * taps + (i - lo)] = w;
      sum += w;
    }
    if (sum > 0) for (let j = 0; j < taps; j++) weights[k * taps + j]! /= sum;
    else weights[k * taps] = 1; // unreachable for s inside the image; keeps the pixel defined
  }
  return { first, end, taps, start, weights };
}

/**
 * Writes `image` letterboxed by `lb` into `out` as float32 NHWC RGB in 0..255, starting at `offset`
 * (one `inputHeight x inputWidth x 3` block). Padding pixels are left as they are: pass a zeroed
 * block for black padding.
 */
export function letterboxInto(image: RgbImage, lb: Letterbox, out: Float32Array, offset: number): void {
  const { width: sw, height: sh, data } = image;
  const iw = lb.inputWidth;
  if (data.length < sw * sh * 3) {
    throw new RangeError(`letterbox: image data has ${data.length} bytes, expected ${sw * sh * 3} for ${sw}x${sh} RGB`);
  }
  if (offset + lb.inputWidth * lb.inputHeight * 3 > out.length) {
    throw new RangeError('letterbox: output block out of range');
  }
  const ax = axisWeights(sw, lb.inputWidth, lb.padX, lb.scale);
  const ay = axisWeights(sh, lb.inputHeight, lb.padY, lb.scale);
  const cols = ax.end - ax.first;
  const rows = ay.end - ay.first;
  if (cols <= 0 || rows <= 0) return;

  // Source rows any output row reads.
  const rowLo = ay.start[0] ?? 0;
  const rowHi = Math.min(sh, (ay.start[rows - 1] ?? 0) + ay.taps);

  // Pass 1: horizontal, source rows rowLo..rowHi-1 -> tmp[(row - rowLo) * cols + col].
  const tmp = new Float32Array((rowHi - rowLo) * cols * 3);
  for (let y = rowLo; y < rowHi; y++) {
    const srcRow = y * sw * 3;
    const tmpRow = (y - rowLo) * cols * 3;
    for (let c = 0; c < cols; c++) {
      const s0 = ax.start[c]!;
      const wBase = c * ax.taps;
      let r = 0;
      let g = 0;
      let b = 0;
      for (let j = 0; j < ax.taps; j++) {
        const w = ax.weights[wBase + j]!;
        if (w === 0) continue;
        const p = srcRow + (s0 + j) * 3;
        r += w * data[p]!;
        g += w * data[p + 1]!;
        b += w * data[p + 2]!;
      }
      const t = tmpRow + c * 3;
      tmp[t] = r;
      tmp[t + 1] = g;
      tmp[t + 2] = b;
    }
  }

  // Pass 2: vertical, into the content rectangle of the output block.
  for (let k = 0; k < rows; k++) {
    const s0 = ay.start[k]! - rowLo;
    const wBase = k * ay.taps;
    const outRow = offset + ((ay.first + k) * iw + ax.first) * 3;
    const rowEnd = outRow + cols * 3;
    out.fill(0, outRow, rowEnd);
    for (let j = 0; j < ay.taps; j++) {
      const w = ay.weights[wBase + j]!;
      if (w === 0) continue;
      let t = (s0 + j) * cols * 3;
      for (let o = outRow; o < rowEnd; o++, t++) out[o]! += w * tmp[t]!;
    }
  }
}

/**
 * Letterboxes a batch of RGB images into one float32 NHWC tensor of `inputSize` squares, pixel
 * values 0..255, as the square-input models of the zoo take them; `model` names it in errors.
 * Resampled in TypeScript on the calling thread: the reference `letterboxBatchNative` is checked
 * against (test/integration/native-letterbox.test.ts).
 */
export function letterboxBatch(images: readonly RgbImage[], inputSize: number, model: string): { input: TensorData; letterboxes: Letterbox[] } {
  const block = inputSize * inputSize * 3;
  const data = new Float32Array(images.length * block);
  const letterboxes = images.map((image, i) => {
    checkImage(image, i, model);
    const lb = letterboxFor(image.width, image.height, inputSize, inputSize);
    letterboxInto(image, lb, data, i * block);
    return lb;
  });
  return { input: { data, dims: [images.length, inputSize, inputSize, 3], type: 'float32' }, letterboxes };
}

/**
 * `letterboxBatch` in libvips (sharp), off the event loop: each image resized, padded and widened
 * to float32 in one pass, then copied into the tensor. The image lands on whole pixels
 * (`placement`), at most half a model pixel from where the exact letterbox puts it; the
 * letterbox returned stays the exact one, so `sourceSize` still recovers the image's size.
 */
export async function letterboxBatchNative(images: readonly ImageInput[], inputSize: number, model: string): Promise<{ input: TensorData; letterboxes: Letterbox[] }> {
  const letterboxes = images.map((image, i) => {
    if (!isJpeg(image)) checkImage(image, i, model);
    return letterboxFor(image.width, image.height, inputSize, inputSize);
  });
  const placed = await Promise.all(
    images.map((image, i) =>
      placeImage(image, placement(image, letterboxes[i]!), inputSize, inputSize).catch((err: unknown) => {
        throw new PanoptesError(ErrorCode.ImageDecode, `${model}: image ${i}: ${(err as Error).message}`, { cause: err, details: { index: i } });
      }),
    ),
  );
  return { input: { data: stack(placed), dims: [images.length, inputSize, inputSize, 3], type: 'float32' }, letterboxes };
}

/**
 * Equal-sized arrays one after another, in memory of their own that the model's thread can take
 * over (sharp's cannot be transferred), not zero-filled first since every element is written.
 */
function stack(arrays: readonly Float32Array[]): Float32Array {
  const block = arrays[0]?.length ?? 0;
  const data = new Float32Array(Buffer.allocUnsafeSlow(arrays.length * block * Float32Array.BYTES_PER_ELEMENT).buffer);
  arrays.forEach((array, i) => data.set(array, i * block));
  return data;
}

/** The letterbox's content rectangle rounded to whole model pixels, inside the input. */
export function placement(image: { width: number; height: number }, lb: Letterbox): Placement {
  const width = Math.min(lb.inputWidth, Math.max(1, Math.round(image.width * lb.scale)));
  const height = Math.min(lb.inputHeight, Math.max(1, Math.round(image.height * lb.scale)));
  const left = Math.min(lb.inputWidth - width, Math.max(0, Math.round(lb.padX)));
  const top = Math.min(lb.inputHeight - height, Math.max(0, Math.round(lb.padY)));
  return { width, height, left, top };
}

function checkImage(image: RgbImage, index: number, model: string): void {
  if (!(image.width > 0 && image.height > 0) || image.data.length !== image.width * image.height * 3) {
    throw new PanoptesError(ErrorCode.ImageDecode, `${model}: image ${index} is not ${image.width}x${image.height} RGB (${image.data.length} bytes)`, {
      details: { index, width: image.width, height: image.height, bytes: image.data.length },
    });
  }
}
