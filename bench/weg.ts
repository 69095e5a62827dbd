// `npm run bench -- weg [--minutes M]`: specialization (WEG, thesis ch. 5) on real models and real
// footage, against the oracle alone on the same inputs in the same run.
//
// Objects: every detection CenterNet finds in the shared clips, cropped; the oracle is
// EfficientNet-Lite2 (ImageNet, 260 px), whose label of a crop is its class; the template is
// EfficientNet-Lite0 run at 128 px, its top layer retrained on the dominant classes + "other".
// The crops are split in time (alternate 10 s blocks of each clip): the pool the template's head
// trains on, and the one traces are drawn from. The footage is too short for the thesis'
// 5-minute segments, so traces are built its way (§5.4): segments of n dominant classes at skew
// p, drawn from the held-out crops, one input every 1/6 s; and a uniformly random trace.
//
// Each trace runs twice: the oracle alone (its labels are the reference), then WEG. Model time
// is measured per classification; retraining waits (`awaitTraining`) and the head starts at the
// stream time the training took, so the figures do not depend on how busy the machine is.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  behaviourByDominant,
  createHeadTrainer,
  createOnnxRuntime,
  createSpecializer,
  cropImage,
  decodeJpeg,
  loadFeatureExtractor,
  loadModelRunner,
  measureBehaviour,
  sample,
  type FeatureExtractor,
  type LabelledPool,
  type ModelRuntime,
  type RgbImage,
} from '../analyzers/index.js';
import { createLogger, loadModelZoo, projectRoot, seededRandom, type ResolvedModel } from '../core/index.js';
import { createFileSource } from '../ingest/index.js';

const logger = createLogger({ level: 'warn' });
const footage = join(projectRoot(), '../shared/footage');
/** Clips and the rate they are sampled at: about one new view of each object per sample. */
const CLIPS: readonly [string, number][] = [
  ['car-detection.mp4', 4],
  ['one-by-one-person-detection.mp4', 1],
  ['bottle-detection.mp4', 2],
  ['person-bicycle-car-detection.gif', 6],
  ['people-detection.gif', 6],
  ['store-aisle-detection.gif', 6],
  ['worker-zone-detection.gif', 6],
  ['classroom.gif', 6],
  ['face-demographics-walking.gif', 6],
];
const MIN_CROP_SIDE = 32;
const SPLIT_BLOCK_MS = 10_000;
const INPUT_INTERVAL_MS = 1000 / 6;
const SEED = 7;

interface Crop {
  image: RgbImage;
  test: boolean;
}

/** Every detection of CenterNet in the clips, cropped with a margin of 10% of its size. */
async function detectionCrops(runtime: ModelRuntime, zoo: Readonly<Record<string, ResolvedModel>>): Promise<Crop[]> {
  const detector = await loadModelRunner(zoo.centernet!, runtime);
  const params = detector.parseParams({ minScore: 0.4 });
  const crops: Crop[] = [];
  for (const [clip, fps] of CLIPS) {
    const path = join(footage, clip);
    const frames: { image: RgbImage; timeMs: number }[] = [];
    for await (const frame of createFileSource({ id: clip, path, fps, speed: 'max', loop: false, logger }).frames()) {
      frames.push({ image: await decodeJpeg(frame.jpeg), timeMs: (frames.length * 1000) / fps });
    }
    const before = crops.length;
    for (let i = 0; i < frames.length; i += 8) {
      const batch = frames.slice(i, i + 8);
      const outputs = await detector.run(batch.map((f) => f.image), batch.map(() => params));
      outputs.forEach((output, k) => {
        if (output.kind !== 'detections') return;
        for (const { box } of output.detections) {
          const [w, h] = [box.x2 - box.x1, box.y2 - box.y1];
          if (Math.min(w, h) < MIN_CROP_SIDE) continue;
          const test = Math.floor(batch[k]!.timeMs / SPLIT_BLOCK_MS) % 2 === 1;
          crops.push({ image: cropImage(batch[k]!.image, box, 0.1 * Math.max(w, h)), test });
        }
      });
    }
    console.log(`  ${clip}: ${frames.length} frames at ${fps} fps, ${crops.length - before} crops`);
  }
  await detector.dispose();
  return crops;
}

async function inBatches<T>(crops: readonly Crop[], run: (images: RgbImage[]) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < crops.length; i += 16) out.push(...(await run(crops.slice(i, i + 16).map((c) => c.image))));
  return out;
}

async function poolOf(extractor: FeatureExtractor, crops: readonly Crop[], labels: readonly string[]): Promise<LabelledPool> {
  const rows = await inBatches(crops, async (images) => {
    const features = await extractor.features(images);
    return images.map((_, i) => features.slice(i * extractor.featureCount, (i + 1) * extractor.featureCount));
  });
  const featureCount = extractor.featureCount;
  const features = new Float32Array(rows.length * featureCount);
  rows.forEach((row, i) => features.set(row, i * featureCount));
  return { featureCount, features, labels };
}

interface Trace {
  name: string;
  skewed: boolean;
  inputs: RgbImage[];
}

/** Thesis §5.4: each input from the dominant classes with probability `skew` (else from another class), then a random crop of that class. */
function trace(byClass: ReadonlyMap<string, RgbImage[]>, segments: readonly { dominant: number; skew: number }[], perSegment: number, random: () => number): RgbImage[] {
  const classes = [...byClass.keys()].sort();
  const pick = (from: readonly string[]): RgbImage => {
    const crops = byClass.get(from[Math.floor(random() * from.length)]!)!;
    return crops[Math.floor(random() * crops.length)]!;
  };
  return segments.flatMap(({ dominant, skew }) => {
    const d = sample(classes, dominant, random);
    const others = classes.filter((c) => !d.includes(c));
    return Array.from({ length: perSegment }, () => (dominant > 0 && random() < skew ? pick(d) : pick(dominant > 0 ? others : classes)));
  });
}

export async function wegBench(args: readonly string[]): Promise<void> {
  const at = args.indexOf('--minutes');
  const minutes = at >= 0 ? Number(args[at + 1]) : 5;
  if (!(minutes > 0)) throw new Error(`--minutes: expected a positive number of minutes per trace, got ${args[at + 1]}`);
  if (!existsSync(footage)) throw new Error(`the weg benchmark needs ${footage} (../shared/footage beside the project)`);
  const zoo = loadModelZoo();
  const runtime = createOnnxRuntime({ logger });
  const trainer = createHeadTrainer();
  const headDir = mkdtempSync(join(tmpdir(), 'panoptes-weg-'));
  try {
    console.log('objects: cropping CenterNet detections from the shared clips');
    const crops = await detectionCrops(runtime, zoo);
    const oracleRunner = await loadModelRunner(zoo['efficientnet-lite2']!, runtime);
    const oracle = async (images: readonly RgbImage[]): Promise<string[]> =>
      (await oracleRunner.run(images, images.map(() => ({})))).map((o) => (o.kind === 'attributes' ? o.attributes[0]!.value : ''));
    const labels = await inBatches(crops, oracle);
    const templateSpec = { ...zoo['efficientnet-lite0']!, name: 'efficientnet-lite0-128', inputSize: 128 };
    const extractor = await loadFeatureExtractor(templateSpec, runtime);
    const pool = await poolOf(extractor, crops, labels);
    const split = (test: boolean): LabelledPool => {
      const rows = crops.flatMap((c, i) => (c.test === test ? [i] : []));
      const features = new Float32Array(rows.length * pool.featureCount);
      rows.forEach((row, i) => features.set(pool.features.subarray(row * pool.featureCount, (row + 1) * pool.featureCount), i * pool.featureCount));
      return { featureCount: pool.featureCount, features, labels: rows.map((r) => labels[r]!) };
    };
    const [train, test] = [split(false), split(true)];
    const counts = new Map<string, number>();
    for (const l of labels) counts.set(l, (counts.get(l) ?? 0) + 1);
    const top = [...counts].sort((a, b) => b[1] - a[1]);
    console.log(`  ${crops.length} crops (${train.labels.length} to train on, ${test.labels.length} held out), ${counts.size} classes; most frequent: ${top.slice(0, 12).map(([l, n]) => `${l} ${n}`).join(', ')}`);

    const random = seededRandom(SEED);
    const training = { skew: 0.6, maxRows: 600 };
    console.log('objects: the template specialized to n classes, 10 random dominant sets per n (trained on one half, tested on the other)');
    const grid = await measureBehaviour(train, test, { ...training, dominantCounts: [1, 2, 5, 10, 15, 20], random, train: (job) => trainer.train(job) });
    for (const g of grid) console.log(`  n=${g.dominant}: a_in ${g.aIn.toFixed(3)}, e_in→out ${g.eInOut.toFixed(3)}, a_out ${g.aOut.toFixed(3)}, retrain ${g.trainMs.toFixed(0)} ms`);

    const byClass = new Map<string, RgbImage[]>();
    crops.forEach((c, i) => {
      if (!c.test) return;
      const list = byClass.get(labels[i]!) ?? [];
      list.push(c.image);
      byClass.set(labels[i]!, list);
    });
    // Classes the head can learn: some crops in each half.
    const trainCounts = new Map<string, number>();
    for (const l of train.labels) trainCounts.set(l, (trainCounts.get(l) ?? 0) + 1);
    for (const [label, images] of byClass) if (images.length < 5 || (trainCounts.get(label) ?? 0) < 5) byClass.delete(label);
    console.log(`  traces draw from the ${byClass.size} classes with at least 5 crops in each half`);
    const perSegment = Math.round((minutes * 60_000) / INPUT_INTERVAL_MS);
    const traces: Trace[] = [
      { name: 'objects (5, 0.9)', skewed: true, inputs: trace(byClass, [{ dominant: 5, skew: 0.9 }], perSegment, random) },
      { name: 'objects random', skewed: false, inputs: trace(byClass, [{ dominant: 0, skew: 0 }], perSegment, random) },
    ];

    const templateFeatures = async (images: readonly RgbImage[]) => extractor.features(images);
    const workloads = [];
    for (const t of traces) {
      const reference: string[] = [];
      let oracleMs = 0;
      for (const input of t.inputs) {
        const started = performance.now();
        reference.push((await oracle([input]))[0]!);
        oracleMs += performance.now() - started;
      }
      const specializer = createSpecializer<RgbImage>({
        name: 'objects',
        oracle,
        // The oracle's own labels are the truth here (a* = 1), so the cascade may fall at most 5 points below them.
        weg: { oracleAccuracy: 1, accuracyMargin: -0.05 },
        templates: [{ name: templateSpec.name, behaviour: behaviourByDominant(grid), pool: train, features: templateFeatures }],
        training,
        train: (job) => trainer.train(job),
        runtime,
        headDir,
        random: seededRandom(SEED),
        awaitTraining: true,
      });
      let wegMs = 0;
      let agree = 0;
      for (const [i, input] of t.inputs.entries()) {
        const result = await specializer.classify(input, i * INPUT_INTERVAL_MS);
        wegMs += result.modelMs;
        if (result.label === reference[i]) agree += 1;
      }
      const s = specializer.status();
      await specializer.close();
      const n = t.inputs.length;
      const w = {
        name: t.name,
        skewed: t.skewed,
        oracleMs: round(oracleMs / n, 2),
        wegMs: round(wegMs / n, 2),
        speedup: round(oracleMs / wegMs, 2),
        agreement: round(agree / n, 3),
        oracleAgreement: 1,
        retrainMs: s.retrains === 0 ? 0 : round(s.retrainMs / s.retrains, 0),
        specialRate: round(s.specialized / s.inputs, 3),
        cascadeRate: s.specialized === 0 ? 0 : round(s.fellThrough / s.specialized, 3),
        transitions: s.transitions,
        meanDominant: s.transitions === 0 ? 0 : round(s.dominantSum / s.transitions, 1),
        meanWindow: s.transitions === 0 ? 0 : round(s.windowSum / s.transitions, 1),
        trainedOn: s.trainedOn ?? 'none',
      };
      console.log(`${t.name}: ${n} inputs; oracle ${w.oracleMs} ms, WEG ${w.wegMs} ms per classification (${w.speedup}x), agreement ${w.agreement}; special rate ${w.specialRate}, cascade rate ${w.cascadeRate}, ${w.transitions} transitions, |D| ${w.meanDominant}, w ${w.meanWindow}, retrain ${w.retrainMs} ms (${w.trainedOn})`);
      workloads.push(w);
    }
    await Promise.all([oracleRunner.dispose(), extractor.dispose()]);
    console.log(JSON.stringify({ workloads }));
  } finally {
    await trainer.close();
    await runtime.close();
    rmSync(headDir, { recursive: true, force: true });
  }
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));
