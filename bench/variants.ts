// `npm run bench -- variants`: each model of the zoo that names `variantOf` (MCDNN's cheaper
// stand-ins), measured against the model it stands in for on the shared footage, with its cost
// (ms per image on this machine, both models run side by side). The accuracy is what
// `variantOf.accuracy` in configs/models.yaml records:
// - classifiers: top-1 agreement on the footage's objects (every CenterNet detection, cropped: the
//   crops `npm run bench -- weg` uses), at batch 16;
// - detectors: F1 of the variant's detections against the model's (same class, IoU ≥ 0.5, each
//   matched once) on frames of every clip, at batch 8.
import { createOnnxRuntime, decodeJpeg, loadModelRunner, matchedObjects, type ModelRuntime, type RgbImage } from '../analyzers/index.js';
import { loadModelZoo, type Detection, type ResolvedModel } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';
import { footage, inBatches, logger } from './weg-crops.js';
import { CLIPS, objectCrops } from './weg-objects.js';

const BATCH = 16;
const DETECTOR_BATCH = 8;
/** Frames per second taken from each clip for the detectors: enough scenes, not every near-copy. */
const DETECTOR_FPS = 2;

interface VariantResult {
  model: string;
  variantOf: string;
  accuracy: number;
  recorded: number;
  cost: number;
}

export async function variantsBench(): Promise<void> {
  const zoo = loadModelZoo();
  const variants = Object.values(zoo).filter((m) => m.variantOf);
  if (variants.length === 0) throw new Error('no model in configs/models.yaml names variantOf');
  const runtime = createOnnxRuntime({ logger });
  try {
    const classifiers = variants.filter((m) => m.task === 'recognize-attributes');
    const detectors = variants.filter((m) => m.task === 'detect-objects');
    const results = [
      ...(classifiers.length > 0 ? await classifierVariants(classifiers, zoo, runtime) : []),
      ...(detectors.length > 0 ? await detectorVariants(detectors, zoo, runtime) : []),
    ];
    console.log(JSON.stringify({ variants: results }));
  } finally {
    await runtime.close();
  }
}

async function classifierVariants(variants: readonly ResolvedModel[], zoo: Readonly<Record<string, ResolvedModel>>, runtime: ModelRuntime): Promise<VariantResult[]> {
  const images = (await objectCrops(runtime, zoo)).map((c) => c.image);
  const results: VariantResult[] = [];
  for (const variant of variants) {
    const of = zoo[variant.variantOf!.model]!;
    const [reference, answers] = [await topClasses(of, images, runtime), await topClasses(variant, images, runtime)];
    const agreement = answers.labels.filter((label, i) => label === reference.labels[i]).length / images.length;
    results.push(report(variant, of, agreement, `agrees on ${(100 * agreement).toFixed(1)}% of ${images.length} crops`, answers.msPerImage, reference.msPerImage));
  }
  return results;
}

/** Each detector variant and the model it stands in for, run on the same frames, batch by batch. */
async function detectorVariants(variants: readonly ResolvedModel[], zoo: Readonly<Record<string, ResolvedModel>>, runtime: ModelRuntime): Promise<VariantResult[]> {
  const results: VariantResult[] = [];
  for (const variant of variants) {
    const of = zoo[variant.variantOf!.model]!;
    const [reference, candidate] = [await loadModelRunner(of, runtime), await loadModelRunner(variant, runtime)];
    try {
      const detect = async (runner: typeof reference, frames: RgbImage[]): Promise<{ detections: Detection[][]; ms: number }> => {
        const params = runner.parseParams({});
        const started = performance.now();
        const outputs = await runner.run(frames, frames.map(() => params));
        return { detections: outputs.map((o) => (o.kind === 'detections' ? o.detections : [])), ms: performance.now() - started };
      };
      let [matched, referenceObjects, variantObjects, frameCount, referenceMs, variantMs] = [0, 0, 0, 0, 0, 0];
      for (const [clip] of CLIPS) {
        let batch: RgbImage[] = [];
        const flush = async (): Promise<void> => {
          if (frameCount === 0) await Promise.all([detect(reference, batch), detect(candidate, batch)]);
          const [a, b] = [await detect(reference, batch), await detect(candidate, batch)];
          a.detections.forEach((want, i) => {
            matched += matchedObjects(want, b.detections[i]!);
            referenceObjects += want.length;
            variantObjects += b.detections[i]!.length;
          });
          [referenceMs, variantMs, frameCount] = [referenceMs + a.ms, variantMs + b.ms, frameCount + batch.length];
          batch = [];
        };
        for await (const frame of createFileSource({ id: clip, path: `${footage}/${clip}`, fps: DETECTOR_FPS, speed: 'max', loop: false, logger }).frames()) {
          batch.push(await decodeJpeg(frame.jpeg));
          if (batch.length === DETECTOR_BATCH) await flush();
        }
        if (batch.length > 0) await flush();
      }
      const f1 = referenceObjects + variantObjects === 0 ? 1 : (2 * matched) / (referenceObjects + variantObjects);
      const summary = `F1 ${f1.toFixed(3)} on ${frameCount} frames (${referenceObjects} objects by ${of.name}, ${variantObjects} by ${variant.name}, ${matched} matched)`;
      results.push(report(variant, of, f1, summary, variantMs / frameCount, referenceMs / frameCount));
    } finally {
      await Promise.all([reference.dispose(), candidate.dispose()]);
    }
  }
  return results;
}

function report(variant: ResolvedModel, of: ResolvedModel, accuracy: number, summary: string, variantMs: number, referenceMs: number): VariantResult {
  console.log(
    `${variant.name} for ${of.name}: ${summary} (recorded: ${variant.variantOf!.accuracy}); ` +
      `${variantMs.toFixed(2)} ms per image against ${referenceMs.toFixed(2)} (${(variantMs / referenceMs).toFixed(3)} of the cost)`,
  );
  return { model: variant.name, variantOf: of.name, accuracy: round(accuracy, 3), recorded: variant.variantOf!.accuracy, cost: round(variantMs / referenceMs, 3) };
}

/** A classifier's top class on each image, and its time per image over all of them at batch 16. */
async function topClasses(model: ResolvedModel, images: readonly RgbImage[], runtime: ModelRuntime): Promise<{ labels: string[]; msPerImage: number }> {
  const runner = await loadModelRunner(model, runtime);
  try {
    const run = async (batch: readonly RgbImage[]): Promise<string[]> =>
      (await runner.run(batch, batch.map(() => ({})))).map((o) => (o.kind === 'attributes' ? o.attributes[0]!.value : ''));
    await run(images.slice(0, BATCH));
    const started = performance.now();
    const labels = await inBatches(images, run);
    return { labels, msPerImage: (performance.now() - started) / images.length };
  } finally {
    await runner.dispose();
  }
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));
