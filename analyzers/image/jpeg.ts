import sharp from 'sharp';
import { ErrorCode, PanoptesError } from '../../core/index.js';

/** A decoded image: interleaved RGB, 3 bytes per pixel, row-major. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}


/**
 * An image still JPEG-encoded, its size read from its header: decoded only where pixels are
 * needed, and then straight to the size wanted (a model's letterbox decodes it shrunk on load).
 */
export interface JpegImage {
  width: number;
  height: number;
  jpeg: Uint8Array;
}

/** What a model can be given: pixels, or a JPEG its pre-processing decodes. */
export type ImageInput = RgbImage | JpegImage;

export const isJpeg = (image: ImageInput): image is JpegImage => 'jpeg' in image;

/**
 * The largest image decoded, in pixels: 8192×8192, room for any 8K camera (DCI 8192×4320, or a
 * 4:3 source scaled to ingest's widest 7680). A JPEG of 12000×12000 fits in 844 KB and decodes to
 * 432 MB; frames and crops come off a bus anyone may write to.
 */
export const MAX_IMAGE_PIXELS = 8192 * 8192;

/** The image's pixels: itself, or its JPEG decoded. */
export function pixelsOf(image: ImageInput): Promise<RgbImage> {
  return isJpeg(image) ? decodeJpeg(image.jpeg) : Promise.resolve(image);
}

/** A JPEG's size from its header (no decoding); a PanoptesError when it is not a readable JPEG. */
export async function jpegImage(jpeg: Uint8Array): Promise<JpegImage> {
  try {
    const { width, height, format } = await sharp(jpeg).metadata();
    if (format !== 'jpeg' || !width || !height) throw new Error(`not a JPEG image (${format ?? 'unknown format'})`);
    if (width * height > MAX_IMAGE_PIXELS) throw new Error(`${width}x${height} is over the limit of ${MAX_IMAGE_PIXELS} pixels`);
    return { width, height, jpeg };
  } catch (err) {
    throw new PanoptesError(ErrorCode.ImageDecode, `cannot read JPEG (${jpeg.length} bytes): ${(err as Error).message}`, { cause: err });
  }
}

export async function decodeJpeg(jpeg: Uint8Array): Promise<RgbImage> {
  try {
    const { data, info } = await sharp(jpeg, { failOn: 'error', limitInputPixels: MAX_IMAGE_PIXELS }).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } catch (err) {
    // sharp's own words for the pixel limit do not say the size: the header does.
    const size = await sharp(jpeg).metadata().then((m) => ` of ${m.width}x${m.height}`, () => '');
    throw new PanoptesError(ErrorCode.ImageDecode, `cannot decode JPEG${size} (${jpeg.length} bytes): ${(err as Error).message}`, { cause: err });
  }
}

export async function encodeJpeg(image: RgbImage, quality = 90): Promise<Uint8Array> {
  const buffer = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } }).jpeg({ quality }).toBuffer();
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}
