import sharp from 'sharp';
import type { RgbImage } from './jpeg.js';

/** Where an image goes inside a padded model input: its size there and its top-left corner. */
export interface Placement {
  width: number;
  height: number;
  left: number;
  top: number;
}

/**
 * The image resized to `place` and padded with black to `outWidth x outHeight`, in libvips on
 * libuv's threads (never the event loop): interleaved RGB bytes, row-major.
 */
export async function placeImage(image: RgbImage, place: Placement, outWidth: number, outHeight: number): Promise<Buffer> {
  return sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } })
    .resize(place.width, place.height, { fit: 'fill', kernel: 'linear' })
    .extend({ top: place.top, left: place.left, bottom: outHeight - place.height - place.top, right: outWidth - place.width - place.left, background: { r: 0, g: 0, b: 0 } })
    .raw()
    .toBuffer();
}
