// The objects workload of `npm run bench -- weg`: every detection CenterNet finds in the shared
// clips, cropped; the oracle is EfficientNet-Lite2 (ImageNet, 260 px), whose top class is the
// crop's label; the templates are EfficientNet-Lite0 run at 128 and at 224 px.
import { readFileSync } from 'node:fs';
import { cropImage, loadFeatureExtractor, loadModelRunner, type ModelRuntime, type RgbImage } from '../analyzers/index.js';
import type { ResolvedModel } from '../core/index.js';
import { cachedCrops, cropsOfClip, inBatches, type Crop } from './weg-crops.js';
import type { Workload } from './weg.js';

/** Clips and the rate they are sampled at (the GIFs: every frame). */
export const CLIPS: readonly [string, number][] = [
  ['car-detection.mp4', 12.5],
  ['one-by-one-person-detection.mp4', 5],
  ['bottle-detection.mp4', 10],
  ['person-bicycle-car-detection.gif', 12],
  ['people-detection.gif', 12],
  ['store-aisle-detection.gif', 15],
  ['worker-zone-detection.gif', 15],
  ['classroom.gif', 15],
  ['face-demographics-walking.gif', 12],
];
const MIN_CROP_SIDE = 32;

export async function objectsWorkload(runtime: ModelRuntime, zoo: Readonly<Record<string, ResolvedModel>>): Promise<Workload> {
  const oracleRunner = await loadModelRunner(zoo['efficientnet-lite2']!, runtime);
  const oracle = async (images: readonly RgbImage[]): Promise<string[]> =>
    (await oracleRunner.run(images, images.map(() => ({})))).map((o) => (o.kind === 'attributes' ? o.attributes[0]!.value : ''));

  console.log('objects: CenterNet detections in the shared clips, cropped and labelled by the oracle (EfficientNet-Lite2)');
  const crops = await objectCrops(runtime, zoo);
  // Labelled on the very pixels the traces will show the oracle (the cached crops are JPEGs): on
  // crops it is unsure of, the oracle's top class changes with the slightest change of pixels.
  const labels = await inBatches(crops.map((c) => c.image), oracle);

  const templates = [];
  for (const size of [128, 224]) {
    const name = `efficientnet-lite0-${size}`;
    templates.push({ name, extractor: await loadFeatureExtractor({ ...zoo['efficientnet-lite0']!, name, inputSize: size }, runtime) });
  }
  return {
    name: 'objects',
    crops: crops.map((c, i) => ({ ...c, label: labels[i]! })),
    oracle,
    templates,
    training: { skew: 0.6, maxRows: 600 },
    skewed: { dominant: 5, skew: 0.9 },
    dispose: () => oracleRunner.dispose(),
  };
}

/** Every detection CenterNet finds in the shared clips, cropped with a margin, in clip and time order. */
export async function objectCrops(runtime: ModelRuntime, zoo: Readonly<Record<string, ResolvedModel>>): Promise<Crop[]> {
  const key = [JSON.stringify({ CLIPS, MIN_CROP_SIDE }), readFileSync(zoo.centernet!.file)];
  return cachedCrops('objects', key, async () => {
    const detector = await loadModelRunner(zoo.centernet!, runtime);
    const params = detector.parseParams({ minScore: 0.4 });
    const all: Crop[] = [];
    for (const [clip, fps] of CLIPS) {
      all.push(
        ...(await cropsOfClip(clip, fps, 8, async (frames) =>
          (await detector.run(frames, frames.map(() => params))).map((output, i) =>
            output.kind !== 'detections'
              ? []
              : output.detections
                  .map(({ box }) => ({ box, side: Math.min(box.x2 - box.x1, box.y2 - box.y1), size: Math.max(box.x2 - box.x1, box.y2 - box.y1) }))
                  .filter(({ side }) => side >= MIN_CROP_SIDE)
                  .map(({ box, size }) => cropImage(frames[i]!, box, 0.1 * size)),
          ),
        )),
      );
    }
    await detector.dispose();
    return all;
  });
}
