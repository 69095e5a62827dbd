import sharp from 'sharp';
import { ErrorCode, PanoptesError } from '../../core/index.js';

/** A decoded image: interleaved RGB, 3 bytes per pixel, row-major. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}


export async function decodeJpeg(jpeg: Uint8Array): Promise<RgbImage> {
  try {
    const { data, info } = await sharp(jpeg, { failOn: 'error' }).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } catch (err) {
    throw new PanoptesError(ErrorCode.ImageDecode, `cannot decode JPEG (${jpeg.length} bytes): ${(err as Error).message}`, { cause: err });
  }
}

export async function encodeJpeg(image: RgbImage, quality = 90): Promise<Uint8Array> {
  const buffer = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } }).jpeg({ quality }).toBuffer();
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}
