import sharp from 'sharp';
import { isJpeg, MAX_IMAGE_PIXELS, type ImageInput } from './jpeg.js';

/** Where an image goes inside a padded model input: its size there and its top-left corner. */
export interface Placement {
  width: number;
  height: number;
  left: number;
  top: number;
}

/**
 * The image resized to `place` and padded with black to `outWidth x outHeight`, in libvips on
 * libuv's threads (never the event loop): interleaved RGB, row-major, as float32 0..255 (a
 * model's input, widened by libvips too). A JPEG is decoded in the same pass, shrunk on load
 * where the target is smaller (libjpeg's scaled DCT). sharp's memory cannot be transferred to
 * another thread: copy it into the model's input.
 */
export async function placeImage(image: ImageInput, place: Placement, outWidth: number, outHeight: number): Promise<Float32Array> {
  const input = isJpeg(image)
    ? sharp(image.jpeg, { failOn: 'error', limitInputPixels: MAX_IMAGE_PIXELS }).removeAlpha().toColourspace('srgb')
    : sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });
  const placed = await input
    .resize(place.width, place.height, { fit: 'fill', kernel: 'linear' })
    .extend({ top: place.top, left: place.left, bottom: outHeight - place.height - place.top, right: outWidth - place.width - place.left, background: { r: 0, g: 0, b: 0 } })
    .raw({ depth: 'float' })
    .toBuffer();
  return new Float32Array(placed.buffer, placed.byteOffset, placed.byteLength / Float32Array.BYTES_PER_ELEMENT);
}
