// `npm run bench -- variants`: each model of the zoo that names `variantOf` (MCDNN's cheaper
// stand-ins), measured against the model it stands in for on the objects of the shared footage
// (every CenterNet detection, cropped: the crops `npm run bench -- weg` uses): its accuracy (top-1
// agreement with that model) and its cost (ms per image at batch 16 on this machine, both models
// run side by side). The accuracy is what `variantOf.accuracy` in configs/models.yaml records.
import { createOnnxRuntime, loadModelRunner, type RgbImage } from '../analyzers/index.js';
import { loadModelZoo, type ResolvedModel } from '../core/index.js';
import { inBatches, logger } from './weg-crops.js';
import { objectCrops } from './weg-objects.js';

const BATCH = 16;

export async function variantsBench(): Promise<void> {
  const zoo = loadModelZoo();
  const variants = Object.values(zoo).filter((m) => m.variantOf && m.task === 'recognize-attributes');
  if (variants.length === 0) throw new Error('no classifier in configs/models.yaml names variantOf');
  const runtime = createOnnxRuntime({ logger });
  try {
    const images = (await objectCrops(runtime, zoo)).map((c) => c.image);
    const results = [];
    for (const variant of variants) {
      const of = zoo[variant.variantOf!.model]!;
      const [reference, answers] = [await topClasses(of, images, runtime), await topClasses(variant, images, runtime)];
      const agreement = answers.labels.filter((label, i) => label === reference.labels[i]).length / images.length;
      console.log(
        `${variant.name} for ${of.name}: agrees on ${(100 * agreement).toFixed(1)}% of ${images.length} crops (recorded: ${(100 * variant.variantOf!.accuracy).toFixed(1)}%); ` +
          `${answers.msPerImage.toFixed(2)} ms per image against ${reference.msPerImage.toFixed(2)} (${(answers.msPerImage / reference.msPerImage).toFixed(3)} of the cost)`,
      );
      results.push({ model: variant.name, variantOf: of.name, accuracy: round(agreement, 3), recorded: variant.variantOf!.accuracy, cost: round(answers.msPerImage / reference.msPerImage, 3) });
    }
    console.log(JSON.stringify({ crops: images.length, variants: results }));
  } finally {
    await runtime.close();
  }
}

/** A classifier's top class on each image, and its time per image over all of them at batch 16. */
async function topClasses(model: ResolvedModel, images: readonly RgbImage[], runtime: ReturnType<typeof createOnnxRuntime>): Promise<{ labels: string[]; msPerImage: number }> {
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
