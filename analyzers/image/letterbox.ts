import sharp from 'sharp';
import { isJpeg, type ImageInput } from './jpeg.js';

/** Where an image goes inside a padded model input: its size there and its top-left corner. */
export interface Placement {
  width: number;
  height: number;
  left: number;
  top: number;
}

/**
 * The image resized to `place` and padded with black to `outWidth x outHeight`, in libvips on
 * libuv's threads (never the event loop): interleaved RGB bytes, row-major. A JPEG is decoded in
 * the same pass, shrunk on load where the target is smaller (libjpeg's scaled DCT).
 */
export async function placeImage(image: ImageInput, place: Placement, outWidth: number, outHeight: number): Promise<Buffer> {
  const input = isJpeg(image)
    ? sharp(image.jpeg, { failOn: 'error' }).removeAlpha().toColourspace('srgb')
    : sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });
  return input
    .resize(place.width, place.height, { fit: 'fill', kernel: 'linear' })
    .extend({ top: place.top, left: place.left, bottom: outHeight - place.height - place.top, right: outWidth - place.width - place.left, background: { r: 0, g: 0, b: 0 } })
    .raw()
    .toBuffer();
}
