import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheTargets, calibrate, defaultVariants, encodeFrozenModel, encodeLookupModel, LOOKUP_FEATURES, LOOKUP_HIT, LOOKUP_INPUT, LOOKUP_PROBABILITIES, parseVariant, poolWindow, variantName, type HiddenShape, type VariantSpec } from '../../analyzers/cache/index.js';
import { createOnnxRuntime } from '../../analyzers/index.js';
import { minibatchOf, trainCacheHead, type CacheHeadJob } from '../../analyzers/training/index.js';
import { seededRandom, silentLogger } from '../../core/index.js';
import { f32 } from '../helpers.js';

/**
 * Learned caches on synthetic hidden outputs: a row of class c has a bump of height a on channel
 * c's centre, in noise. The "base model" gives c with a confidence that grows with a; rows with
 * a small bump are hard, so the predictor errs on some and the selector has something to learn.
 */
const shape: HiddenShape = { channels: 4, height: 6, width: 6 };
const CLASSES = 4;

function rowsOf(count: number, seed: number): { hidden: Float32Array; targets: Float32Array; labels: number[] } {
  const random = seededRandom(seed);
  const size = shape.channels * shape.height * shape.width;
  const hidden = new Float32Array(count * size);
  const targets = new Float32Array(count * CLASSES);
  const labels: number[] = [];
  for (let r = 0; r < count; r++) {
    const cls = Math.floor(random() * CLASSES);
    const height = random() * 1.5;
    for (let i = 0; i < size; i++) hidden[r * size + i] = (random() - 0.5) * 2;
    for (const y of [2, 3]) for (const x of [2, 3]) hidden[r * size + cls * 36 + y * 6 + x]! += height * 2;
    // The base model is sure of strong bumps and spreads weak ones; a weak bump may lose to noise.
    const label = height < 0.3 && random() < 0.5 ? Math.floor(random() * CLASSES) : cls;
    labels.push(label);
    for (let c = 0; c < CLASSES; c++) targets[r * CLASSES + c] = c === label ? 0.4 + 0.4 * Math.min(1, height) : (0.6 - 0.4 * Math.min(1, height)) / (CLASSES - 1);
  }
  return { hidden, targets, labels };
}

const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
afterAll(() => runtime.close());
const scratch = mkdtempSync(join(tmpdir(), 'panoptes-cache-head-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('learned-cache variants', () => {
  it('trains a conv variant in minibatches whose step fits the WebAssembly heap', () => {
    // FaceRes' 128×56×56 layer: 17 rows of a 5×5 conv of stride 2 ran its heap out (3 GB held).
    expect(minibatchOf({ family: 'Conv', kernel: 5, stride: 2 }, { channels: 128, height: 56, width: 56 }, 32)).toBe(5);
    expect(minibatchOf({ family: 'Conv', kernel: 3, stride: 1 }, { channels: 128, height: 56, width: 56 }, 32)).toBe(11);
    // EfficientNet-Lite2's first candidate layer: a 3×3 conv keeps the asked 32; other families always do.
    expect(minibatchOf({ family: 'Conv', kernel: 3, stride: 1 }, { channels: 32, height: 65, width: 65 }, 32)).toBe(32);
    expect(minibatchOf({ family: 'Pool', features: 100_352 }, { channels: 128, height: 56, width: 56 }, 32)).toBe(32);
    expect(minibatchOf({ family: 'Conv', kernel: 7, stride: 1 }, { channels: 2048, height: 64, width: 64 }, 32)).toBe(1);
  });

  it("name, parse and scale the paper's six to a layer", () => {
    for (const name of ['FC(1024)', 'Pool(8192)', 'Conv(3,1)', 'Conv(5,2)']) expect(variantName(parseVariant(name))).toBe(name);
    expect(() => parseVariant('FC(0)')).toThrow(/positive integers/);
    expect(() => parseVariant('MLP(3)')).toThrow(/none of FC\(h\), Pool\(h\), Conv\(k,s\)/);
    // ResNet-18's block 3 (128×16×16 = 32,768 values): the paper's own six.
    expect(defaultVariants({ channels: 128, height: 16, width: 16 }).map(variantName)).toEqual(['FC(1024)', 'FC(512)', 'Pool(8192)', 'Pool(4096)', 'Conv(3,1)', 'Conv(5,2)']);
    expect(poolWindow({ features: 8192 }, { channels: 128, height: 16, width: 16 })).toBe(2);
    // A larger layer has no FC variants.
    expect(defaultVariants({ channels: 24, height: 56, width: 56 }).map(variantName)).toEqual(['Pool(18816)', 'Pool(9408)', 'Conv(3,1)', 'Conv(5,2)']);
  });

  it.each(['FC(36)', 'Pool(36)', 'Conv(3,1)', 'Conv(5,2)'])('%s trains in TensorFlow.js and answers the same in onnxruntime, mostly as the base model does', async (name) => {
    const variant = parseVariant(name);
    const train = rowsOf(600, 1);
    const test = rowsOf(200, 2);
    const trained = await trainCacheHead({ variant, shape, hidden: train.hidden, targets: train.targets, classes: CLASSES, evaluate: test.hidden.slice() });
    expect(['wasm', 'cpu', 'tensorflow']).toContain(trained.backend);
    const { predicted, hit } = trained.evaluation!;
    const agree = test.labels.filter((label, i) => predicted[i] === label).length / test.labels.length;
    // A weak bump can lose to the noise: about 80% is what these rows allow (chance is 25%).
    expect(agree).toBeGreaterThan(0.7);
    const file = join(scratch, `${name}.onnx`);
    writeFileSync(file, encodeLookupModel(variant, shape, CLASSES, trained.weights));
    const model = await runtime.load({ name, file });
    try {
      const out = await model.run({ [LOOKUP_INPUT]: { type: 'float32', data: test.hidden, dims: [200, shape.channels, shape.height, shape.width] } });
      const probabilities = f32(out[LOOKUP_PROBABILITIES]!);
      const hits = f32(out[LOOKUP_HIT]!);
      expect(out[LOOKUP_HIT]!.dims).toEqual([200, 1]);
      for (let i = 0; i < 200; i++) {
        const row = probabilities.subarray(i * CLASSES, (i + 1) * CLASSES);
        expect(row.indexOf(Math.max(...row))).toBe(predicted[i]);
        expect(hits[i]).toBeCloseTo(hit[i]!, 4);
      }
    } finally {
      await model.dispose();
    }
  });

  it('raising w_FP lowers the hit rate and raises the precision of hits', async () => {
    const train = rowsOf(600, 3);
    const test = rowsOf(400, 4);
    const variant: VariantSpec = { family: 'Pool', features: 36 };
    const measured = [];
    for (const falsePositiveWeight of [0.25, 1, 4, 16]) {
      const job: CacheHeadJob = { variant, shape, hidden: train.hidden.slice(), targets: train.targets, classes: CLASSES, falsePositiveWeight, evaluate: test.hidden.slice() };
      const { predicted, hit } = (await trainCacheHead(job)).evaluation!;
      const hits = test.labels.map((label, i) => ({ hit: hit[i]! >= 0.5, right: predicted[i] === label })).filter((x) => x.hit);
      measured.push({ falsePositiveWeight, hitRate: hits.length / test.labels.length, precision: hits.filter((x) => x.right).length / Math.max(1, hits.length) });
    }
    for (let i = 1; i < measured.length; i++) {
      expect(measured[i]!.hitRate, JSON.stringify(measured)).toBeLessThan(measured[i - 1]!.hitRate);
      expect(measured[i]!.precision, JSON.stringify(measured)).toBeGreaterThanOrEqual(measured[i - 1]!.precision);
    }
    expect(measured.at(-1)!.precision).toBeGreaterThan(measured[0]!.precision);
  });

  it('fine-tunes from given weights, and refuses weights of another shape', async () => {
    const variant: VariantSpec = { family: 'Conv', kernel: 3, stride: 1 };
    const first = rowsOf(300, 5);
    const trained = await trainCacheHead({ variant, shape, hidden: first.hidden, targets: first.targets, classes: CLASSES, epochs: 5 });
    const again = rowsOf(300, 6);
    const test = rowsOf(200, 7);
    const tuned = await trainCacheHead({ variant, shape, hidden: again.hidden, targets: again.targets, classes: CLASSES, epochs: 1, learningRate: 0.002, init: trained.weights, evaluate: test.hidden });
    expect(test.labels.filter((label, i) => tuned.evaluation!.predicted[i] === label).length / 200).toBeGreaterThan(0.75);
    expect(tuned.weights['conv/W']).not.toEqual(trained.weights['conv/W']);
    // Only the last layer and the selector: the conv stays as it was.
    const head = await trainCacheHead({ variant, shape, hidden: again.hidden.slice(), targets: again.targets, classes: CLASSES, epochs: 1, init: trained.weights, retrain: 'head', evaluate: test.hidden.slice() });
    expect(head.weights['conv/W']).toEqual(trained.weights['conv/W']);
    expect(head.weights['out/W']).not.toEqual(trained.weights['out/W']);
    expect(test.labels.filter((label, i) => head.evaluation!.predicted[i] === label).length / 200).toBeGreaterThan(0.75);
    // The same from the frozen layers' output as onnxruntime computes it, which online retraining keeps per request.
    const file = join(scratch, 'frozen.onnx');
    writeFileSync(file, encodeFrozenModel(variant, shape, CLASSES, trained.weights));
    const frozen = await runtime.load({ name: 'frozen', file });
    const featuresOf = async (hidden: Float32Array, rows: number) =>
      f32((await frozen.run({ [LOOKUP_INPUT]: { type: 'float32', data: hidden.slice(), dims: [rows, shape.channels, shape.height, shape.width] } }))[LOOKUP_FEATURES]!);
    const job = { variant, shape, targets: again.targets, classes: CLASSES, epochs: 1, init: trained.weights, features: await featuresOf(again.hidden, 300) };
    const fromFeatures = await trainCacheHead({ ...job, retrain: 'head', evaluate: await featuresOf(test.hidden, 200) });
    await frozen.dispose();
    const outW = fromFeatures.weights['out/W']!;
    expect(Math.max(...outW.map((w, i) => Math.abs(w - head.weights['out/W']![i]!)))).toBeLessThan(1e-3);
    expect(fromFeatures.evaluation!.predicted.filter((p, i) => p === head.evaluation!.predicted[i]).length).toBeGreaterThanOrEqual(198);
    await expect(trainCacheHead(job)).rejects.toThrow(/as `features` where only the head is retrained/);
    await expect(trainCacheHead({ variant, shape, hidden: again.hidden, targets: again.targets, classes: CLASSES, init: { ...trained.weights, 'conv/W': new Float32Array(3) } })).rejects.toThrow(
      /init weight 'conv\/W' has 3 values for 16×4×3×3/,
    );
  });

  it("folds the base's distribution onto the cache's classes keeping its top class on top, and calibrates a selector's threshold on enough hits", () => {
    // An unsure base: its top class (2, known) has 0.3; the unknown classes hold 0.6 between them.
    const base = Float32Array.of(0.05, 0.05, 0.3, 0.2, 0.2, 0.2);
    const folded = cacheTargets(base, 1, 6, [2, 0, -1]);
    expect([...folded].map((p) => Number(p.toFixed(3)))).toEqual([0.545, 0.091, 0.364]);
    // Ten hits at 0.95 all right, ten at 0.6 half wrong: the threshold rises to where precision holds.
    const answers = [
      ...Array.from({ length: 10 }, () => ({ hit: 0.95, right: true })),
      ...Array.from({ length: 10 }, (_, i) => ({ hit: 0.6, right: i < 5 })),
      ...Array.from({ length: 20 }, () => ({ hit: 0.1, right: false })),
    ];
    expect(calibrate(answers, 0.97)).toEqual({ threshold: 0.7, hitRate: 0.25, accuracy: 1, hits: 10 });
    // Nine right hits are too few to vouch for 97%: the trained threshold stays, with its precision.
    expect(calibrate(answers.slice(1), 0.97)).toEqual({ threshold: 0.5, hitRate: 19 / 39, accuracy: 14 / 19, hits: 19 });
  });
});
