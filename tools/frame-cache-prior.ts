/**
 * `npm run frame-cache-prior`: the selector a detector node's frame cache starts from
 * (`models/centernet.frame-cache-prior.json`, docs/learned-caches.md). CenterNet runs on every
 * clip of the shared footage except `car-detection` (the benchmarks' clip, kept out so that they
 * measure footage the prior never saw), each clip twice as a stream of its own: every frame, and
 * every fourth (a camera sampled slower). Every frame runs whole, and each is paired with the
 * frames before it, as a serving cache pairs them: how the feature map at the default layer
 * changed, and whether the objects stayed the same. A selector is fitted on all the pairs in a
 * seeded order, the way a node fits its own (`fitFrameSelector`), and written with its threshold
 * and the layer, grid and input size it reads.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHeadTrainer, createOnnxRuntime, decodeJpeg, fitFrameSelector, framePriorFile, loadModelRunner, writeFramePrior, type RgbImage } from '../analyzers/index.js';
import { cacheSchema, compileDeployment, createLogger, deploymentSchema, projectRoot, seededRandom } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';

const root = projectRoot();
const footage = join(root, '../shared/footage');
const HELD_OUT = 'car-detection';
/** Streams per clip: every frame, and every fourth. */
const STRIDES = [1, 4];

async function main(): Promise<void> {
  if (!existsSync(footage)) throw new Error(`the prior is learned from ${footage}, which is missing`);
  const logger = createLogger({ level: 'warn' });
  const clips = readdirSync(footage)
    .filter((f) => /\.(mp4|gif)$/.test(f) && !f.startsWith(HELD_OUT))
    .sort();
  const config = compileDeployment(
    deploymentSchema.parse({ apps: [join(root, 'bench/apps/detect-cached.yaml')], sources: [{ id: 'clip', path: join(footage, clips[0]!), apps: ['detect'] }] }),
    join(root, 'configs/bench.yaml'),
    { dataDir: join(root, '.cache/frame-cache-prior') },
  );
  const node = config.apps.detect!.nodes[0]!;
  const spec = config.models.centernet!;
  const defaults = cacheSchema.parse({});
  // Every frame runs whole (every would-be hit is checked), all pairs are kept, and no selector is trained meanwhile.
  const collecting = { ...defaults, prior: false, verifyRate: 1, window: 100_000, minPairs: 100_000, period: 100_000 };
  const runtime = createOnnxRuntime({ logger, workers: 1 });
  const runner = await loadModelRunner(spec, runtime);
  try {
    const params = runner.parseParams({ ...node.params, cache: collecting });
    for (const clip of clips) {
      const frames: RgbImage[] = [];
      for await (const frame of createFileSource({ id: clip, path: join(footage, clip), speed: 'max', loop: false, logger }).frames()) frames.push(await decodeJpeg(frame.jpeg));
      for (const stride of STRIDES) {
        const stream = `prior/${clip}/every-${stride}`;
        for (let i = 0; i < frames.length; i += stride) await runner.finish(await runner.execute(await runner.prepare([frames[i]!], [params], [stream])));
      }
      process.stderr.write(`${clip}: ${frames.length} frames\n`);
    }
    const all = runner.framePairs!();
    const { featureCount } = all;
    const order = shuffled(all.same.length, seededRandom(1));
    const pairs = order.map((i) => ({ features: all.features.slice(i * featureCount, (i + 1) * featureCount), same: all.same[i]! }));
    const trainer = createHeadTrainer();
    // Footage it never saw makes a selector less sure than its held-out pairs say: the prior is held to a stricter target, halfway to 1, on a finer grid of thresholds.
    const target = 1 - (1 - defaults.accuracyTarget) / 2;
    const thresholds = Array.from({ length: 50 }, (_, i) => 0.5 + i / 100);
    const fitted = await fitFrameSelector(pairs, featureCount, { ...defaults, accuracyTarget: target }, (job) => trainer.train(job), 1, thresholds).finally(() => trainer.close());
    const prior = {
      model: spec.name,
      inputSize: spec.inputSize ?? 512,
      tensor: runner.cacheStats!()[0]!.layer,
      grid: defaults.grid,
      pairs: pairs.length,
      source: `${clips.join(', ')} of the shared footage (Intel sample videos, CC BY 4.0): every frame and every fourth, each paired with the ${defaults.pairsPerFrame} frames before it`,
      ...fitted,
    };
    const file = framePriorFile(spec.file);
    await writeFramePrior(file, prior);
    const same = pairs.filter((p) => p.same).length;
    console.log(
      `${file}: ${pairs.length} pairs (${same} with the same objects) at ${prior.tensor}, grid ${prior.grid}; ` +
        `on the held-out quarter, hits ${(100 * fitted.expectedHitRate).toFixed(1)}% from ${fitted.threshold}, ${(100 * fitted.expectedAccuracy).toFixed(1)}% of them right`,
    );
  } finally {
    await runner.dispose();
    await runtime.close();
  }
}

/** 0..n−1 in a random order. */
function shuffled(n: number, random: () => number): number[] {
  const indices = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [indices[i], indices[j]] = [indices[j]!, indices[i]!];
  }
  return indices;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
