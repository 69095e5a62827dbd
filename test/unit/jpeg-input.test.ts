/**
 * A JPEG handed to a model as it is: its size read from the header, decoded by the model's
 * letterbox in the same libvips pass (shrunk on load) into what the decoded pixels give.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeJpeg, jpegImage, pixelsOf } from '../../analyzers/index.js';
import { letterboxBatchNative } from '../../analyzers/models/detector/index.js';
import { ErrorCode, projectRoot } from '../../core/index.js';

const jpeg = readFileSync(join(projectRoot(), 'test/fixtures/images/room-person.jpg'));

describe('a JPEG as a model input', () => {
  it('has the size its pixels have, and decodes to them', async () => {
    const image = await jpegImage(jpeg);
    const pixels = await decodeJpeg(jpeg);
    expect({ width: image.width, height: image.height }).toEqual({ width: pixels.width, height: pixels.height });
    expect(await pixelsOf(image)).toEqual(pixels);
  });

  it('is refused with PANOPTES_IMAGE_DECODE when it is not a JPEG', async () => {
    await expect(jpegImage(new Uint8Array([0xff, 0xd8, 1, 2, 3]))).rejects.toMatchObject({ code: ErrorCode.ImageDecode });
    await expect(jpegImage(readFileSync(join(projectRoot(), 'models/README.md')))).rejects.toMatchObject({ code: ErrorCode.ImageDecode });
  });

  it('letterboxes as its decoded pixels do, with the same letterbox, within a few levels per pixel', async () => {
    const fromJpeg = await letterboxBatchNative([await jpegImage(jpeg)], 512, 'centernet');
    const fromPixels = await letterboxBatchNative([await decodeJpeg(jpeg)], 512, 'centernet');
    expect(fromJpeg.letterboxes).toEqual(fromPixels.letterboxes);
    const a = fromJpeg.input.data as Float32Array;
    const b = fromPixels.input.data as Float32Array;
    let total = 0;
    for (let i = 0; i < a.length; i++) total += Math.abs(a[i]! - b[i]!);
    // Shrink-on-load resamples in the DCT, not after it: close, not equal.
    expect(total / a.length).toBeLessThan(4);
  });

  it('that is truncated fails the letterbox with PANOPTES_IMAGE_DECODE naming the model', async () => {
    const image = await jpegImage(jpeg.subarray(0, jpeg.length >> 1)); // the header is whole: the size reads
    await expect(letterboxBatchNative([image], 512, 'centernet')).rejects.toMatchObject({ code: ErrorCode.ImageDecode, message: expect.stringContaining('centernet') });
  });
});
