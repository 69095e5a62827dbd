/**
 * The libvips letterbox (`letterboxBatchNative`, what the models run on) against the TypeScript
 * reference (`letterboxBatch`): on frames of the shared footage, CenterNet finds the same objects
 * from both inputs (same class, IoU ≥ 0.9, score within 0.05) for every detection above the
 * default threshold. The libvips letterbox is checked on decoded pixels and on the JPEG itself
 * (decoded in the same pass, shrunk on load), as the backend hands frames to a model.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, decodeJpeg, jpegImage, type JpegImage, type RgbImage } from '../../analyzers/index.js';
import { CENTERNET_DEFAULT_MIN_SCORE, decodeCenternet, iou, letterboxBatch, letterboxBatchNative } from '../../analyzers/models/detector/index.js';
import { projectRoot, silentLogger, type Detection } from '../../core/index.js';
import { createFileSource } from '../../ingest/index.js';

const root = projectRoot();
const clips = ['car-detection.mp4', 'one-by-one-person-detection.mp4', 'bottle-detection.mp4'].map((name) => join(root, '../shared/footage', name));
const missing = clips.find((clip) => !existsSync(clip));

/** Every `every`-th frame of a clip, as ingest makes it (JPEG) and decoded, at most `count`. */
async function framesOf(clip: string, every: number, count: number): Promise<{ jpegs: JpegImage[]; images: RgbImage[] }> {
  const jpegs: JpegImage[] = [];
  let seen = 0;
  for await (const frame of createFileSource({ id: 'clip', path: clip, speed: 'max', loop: false, logger: silentLogger() }).frames()) {
    if (seen++ % every === 0) jpegs.push(await jpegImage(frame.jpeg));
    if (jpegs.length === count) break;
  }
  return { jpegs, images: await Promise.all(jpegs.map((j) => decodeJpeg(j.jpeg))) };
}

describe.skipIf(missing !== undefined)(`native letterbox${missing ? ` (skipped: ${missing} is missing)` : ''}`, () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  afterAll(() => runtime.close());

  it('CenterNet finds the same objects in the libvips letterbox as in the TypeScript one', async () => {
    const model = await runtime.load({ name: 'centernet', file: join(root, 'models/centernet.onnx') });
    const detect = async (input: Awaited<ReturnType<typeof letterboxBatchNative>>): Promise<Detection[][]> =>
      decodeCenternet(await model.run({ [model.inputNames[0]!]: input.input }), input.letterboxes, { minScore: CENTERNET_DEFAULT_MIN_SCORE - 0.05, maxDetections: 100, iouThreshold: 0.5 });
    let compared = 0;
    for (const clip of clips) {
      const { jpegs, images } = await framesOf(clip, 15, 8);
      const reference = await detect(letterboxBatch(images, 512, 'centernet'));
      for (const native of [await detect(await letterboxBatchNative(images, 512, 'centernet')), await detect(await letterboxBatchNative(jpegs, 512, 'centernet'))]) {
        for (const [i, wanted] of reference.entries()) {
          const got = native[i]!;
          // Each side's confident detections have their match on the other side (either may sit just under the threshold there).
          for (const [from, to] of [[wanted, got], [got, wanted]] as const) {
            for (const d of from.filter((d) => d.score >= CENTERNET_DEFAULT_MIN_SCORE)) {
              const match = to.find((o) => o.className === d.className && iou(o.box, d.box) >= 0.9 && Math.abs(o.score - d.score) <= 0.05);
              expect(match, `${clip} frame ${i}: ${d.className} ${d.score.toFixed(3)} at ${JSON.stringify(d.box)}`).toBeDefined();
              compared++;
            }
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(40);
    await model.dispose();
  }, 120_000);
});
