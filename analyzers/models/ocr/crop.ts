import type { Box, RgbImage } from '../types.js';
import type { Quad } from './geometry.js';

/** An image with no pixels; what {@link cropImage} returns for a box that misses the image. */
export function emptyRgb(): RgbImage {
  return { width: 0, height: 0, data: new Uint8Array(0) };
}

/**
 * Copies the pixels under `box` (grown by `pad` pixels on every side) into a new image.
 *
 * The box is read as continuous edges in pixel units: `x1`/`y1` are rounded down and `x2`/`y2`
 * up, so a box from a detector that covers a pixel partly keeps that pixel. The result is clipped
 * to the image; a box that lies wholly outside it gives a 0×0 image.
 */
export function cropImage(image: RgbImage, box: Box, pad = 0): RgbImage {
  const x1 = clampInt(Math.floor(Math.min(box.x1, box.x2) - pad), 0, image.width);
  const y1 = clampInt(Math.floor(Math.min(box.y1, box.y2) - pad), 0, image.height);
  const x2 = clampInt(Math.ceil(Math.max(box.x1, box.x2) + pad), 0, image.width);
  const y2 = clampInt(Math.ceil(Math.max(box.y1, box.y2) + pad), 0, image.height);
  const width = x2 - x1;
  const height = y2 - y1;
  if (width <= 0 || height <= 0) return emptyRgb();

  const data = new Uint8Array(width * height * 3);
  const rowBytes = width * 3;
  for (let y = 0; y < height; y++) {
    const src = ((y1 + y) * image.width + x1) * 3;
    data.set(image.data.subarray(src, src + rowBytes), y * rowBytes);
  }
  return { width, height, data };
}

/**
 * Bilinear resize with OpenCV's `INTER_LINEAR` sampling grid (pixel centres aligned:
 * `src = (dst + 0.5) * srcSize / dstSize - 0.5`, clamped at the borders), which is what
 * PaddleOCR's `cv2.resize` calls use. No anti-aliasing when shrinking, like OpenCV.
 */
export function resizeRgb(image: RgbImage, width: number, height: number): RgbImage {
  const dstW = Math.max(0, Math.round(width));
  const dstH = Math.max(0, Math.round(height));
  if (dstW === 0 || dstH === 0 || image.width === 0 || image.height === 0) {
    return { width: dstW, height: dstH, data: new Uint8Array(dstW * dstH * 3) };
  }
  if (dstW === image.width && dstH === image.height) {
    // A copy even of a Buffer (whose `slice` is a view): the caller may own the result.
    return { width: dstW, height: dstH, data: Uint8Array.prototype.slice.call(image.data, 0, dstW * dstH * 3) };
  }

  const xs = axisTaps(image.width, dstW);
  const ys = axisTaps(image.height, dstH);
  const src = image.data;
  const out = new Uint8Array(dstW * dstH * 3);
  const srcStride = image.width * 3;

  for (let y = 0; y < dstH; y++) {
    const row0 = ys.i0[y]! * srcStride;
    const row1 = ys.i1[y]! * srcStride;
    const wy = ys.w[y]!;
    let o = y * dstW * 3;
    for (let x = 0; x < dstW; x++) {
      const c0 = xs.i0[x]! * 3;
      const c1 = xs.i1[x]! * 3;
      const wx = xs.w[x]!;
      for (let c = 0; c < 3; c++) {
        const top = src[row0 + c0 + c]! + (src[row0 + c1 + c]! - src[row0 + c0 + c]!) * wx;
        const bottom = src[row1 + c0 + c]! + (src[row1 + c1 + c]! - src[row1 + c0 + c]!) * wx;
        out[o++] = Math.round(top + (bottom - top) * wy);
      }
    }
  }
  return { width: dstW, height: dstH, data: out };
}

/**
 * Cuts out a (possibly rotated) quadrilateral and straightens it, as PaddleOCR's
 * `get_rotate_crop_image` does before recognition: the output is
 * `trunc(max(|tl-tr|, |bl-br|))` × `trunc(max(|tl-bl|, |tr-br|))`, corners mapped to the output's
 * corners, samples bilinear with the border replicated (PaddleOCR uses a perspective warp with
 * cubic sampling; for the rectangles `decodeDet` returns the map is affine, and bilinear keeps
 * this short). A result at least 1.5 times taller than wide is rotated 90° counter-clockwise
 * (`np.rot90`), for vertical text.
 */
export function cropQuad(image: RgbImage, quad: Quad): RgbImage {
  const [tl, tr, br, bl] = quad;
  const len = (a: readonly number[], b: readonly number[]) => Math.hypot(a[0]! - b[0]!, a[1]! - b[1]!);
  const width = Math.trunc(Math.max(len(tl, tr), len(bl, br)));
  const height = Math.trunc(Math.max(len(tl, bl), len(tr, br)));
  if (width <= 0 || height <= 0 || image.width === 0 || image.height === 0) return emptyRgb();

  const out = new Uint8Array(width * height * 3);
  const src = image.data;
  const maxX = image.width - 1;
  const maxY = image.height - 1;
  for (let y = 0; y < height; y++) {
    const v = y / height;
    // Left and right edges at this row (bilinear in the quad: exact for parallelograms).
    const lx = tl[0] + (bl[0] - tl[0]) * v;
    const ly = tl[1] + (bl[1] - tl[1]) * v;
    const rx = tr[0] + (br[0] - tr[0]) * v;
    const ry = tr[1] + (br[1] - tr[1]) * v;
    for (let x = 0; x < width; x++) {
      const u = x / width;
      const sx = Math.min(Math.max(lx + (rx - lx) * u, 0), maxX);
      const sy = Math.min(Math.max(ly + (ry - ly) * u, 0), maxY);
      const x0 = Math.floor(sx);
      const y0 = Math.floor(sy);
      const x1 = Math.min(x0 + 1, maxX);
      const y1 = Math.min(y0 + 1, maxY);
      const fx = sx - x0;
      const fy = sy - y0;
      const o = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        const p00 = src[(y0 * image.width + x0) * 3 + c]!;
        const p01 = src[(y0 * image.width + x1) * 3 + c]!;
        const p10 = src[(y1 * image.width + x0) * 3 + c]!;
        const p11 = src[(y1 * image.width + x1) * 3 + c]!;
        const top = p00 + (p01 - p00) * fx;
        const bottom = p10 + (p11 - p10) * fx;
        out[o + c] = Math.round(top + (bottom - top) * fy);
      }
    }
  }
  const crop = { width, height, data: out };
  return height / width >= 1.5 ? rotate90ccw(crop) : crop;
}

function rotate90ccw(image: RgbImage): RgbImage {
  const { width: w, height: h } = image;
  const out = new Uint8Array(w * h * 3);
  // np.rot90: out[i][j] = in[j][w - 1 - i]; the output is h wide and w tall.
  for (let i = 0; i < w; i++) {
    for (let j = 0; j < h; j++) {
      const s = (j * w + (w - 1 - i)) * 3;
      const d = (i * h + j) * 3;
      out[d] = image.data[s]!;
      out[d + 1] = image.data[s + 1]!;
      out[d + 2] = image.data[s + 2]!;
    }
  }
  return { width: h, height: w, data: out };
}

interface AxisTaps {
  i0: Int32Array;
  i1: Int32Array;
  w: Float32Array;
}

function axisTaps(srcSize: number, dstSize: number): AxisTaps {
  const scale = srcSize / dstSize;
  const i0 = new Int32Array(dstSize);
  const i1 = new Int32Array(dstSize);
  const w = new Float32Array(dstSize);
  for (let d = 0; d < dstSize; d++) {
    let s = (d + 0.5) * scale - 0.5;
    if (s < 0) s = 0;
    let lo = Math.floor(s);
    if (lo >= srcSize - 1) {
      lo = srcSize - 1;
      s = lo;
    }
    i0[d] = lo;
    i1[d] = Math.min(lo + 1, srcSize - 1);
    w[d] = s - lo;
  }
  return { i0, i1, w };
}

function clampInt(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
