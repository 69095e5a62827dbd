import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, encodeDenseHead, HEAD_INPUT, HEAD_OUTPUT } from '../../analyzers/index.js';
import { createHeadTrainer, type TrainedHead } from '../../analyzers/training/index.js';
import { silentLogger } from '../../core/index.js';
import { clusteredFeatures } from '../helpers.js';

/** Rows around `classes` random centres in `featureCount` dimensions: a labelled pool of pre-forwarded features. */
const clusters = (rows: number, featureCount: number, classes: number, seed: number) =>
  clusteredFeatures({ rows, featureCount, classes, classOf: (r) => r % classes, seed, centreSeed: seed, spread: 0.8 });

const argmax = (values: ArrayLike<number>, offset: number, width: number): number => {
  let best = 0;
  for (let c = 1; c < width; c++) if (values[offset + c]! > values[offset + best]!) best = c;
  return best;
};

describe('a classifier head trained on pre-forwarded features, on its own thread', () => {
  const trainer = createHeadTrainer();
  const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1 });
  const scratch = mkdtempSync(join(tmpdir(), 'panoptes-head-'));
  afterAll(async () => {
    await trainer.close();
    await runtime.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const [featureCount, classes] = [128, 6];
  let head: TrainedHead;

  it('learns the classes of held-out rows, and says which TensorFlow.js backend trained', async () => {
    const pool = clusters(1200, featureCount, classes, 1);
    head = await trainer.train({ ...pool, featureCount, classes, epochs: 20 });
    expect(['wasm', 'cpu', 'tensorflow']).toContain(head.backend);
    expect(head.weights).toHaveLength(featureCount * classes);
    expect(head.loss).toBeLessThan(0.1);
    // The same seed draws the same centres and then 300 rows more: held-out rows of the same classes.
    const same = clusters(1500, featureCount, classes, 1);
    const rows = same.labels.length - 1200;
    let right = 0;
    for (let r = 1200; r < same.labels.length; r++) {
      const logits = Array.from({ length: classes }, (_, c) => {
        let sum = head.bias[c]!;
        for (let f = 0; f < featureCount; f++) sum += same.features[r * featureCount + f]! * head.weights[f * classes + c]!;
        return sum;
      });
      if (argmax(logits, 0, classes) === same.labels[r]) right += 1;
    }
    expect(right / rows).toBeGreaterThan(0.95);
  }, 60_000);

  it('serves through onnxruntime as an ONNX model (Gemm, Softmax) with the same answers', async () => {
    const file = join(scratch, 'head.onnx');
    writeFileSync(file, encodeDenseHead(head));
    const model = await runtime.load({ name: 'head', file });
    const rows = clusters(1500, featureCount, classes, 1);
    const offset = 1200 * featureCount;
    const features = rows.features.slice(offset);
    const outputs = await model.run({ [HEAD_INPUT]: { type: 'float32', dims: [300, featureCount], data: features.slice() } });
    const probabilities = outputs[HEAD_OUTPUT]!;
    expect(probabilities.dims).toEqual([300, classes]);
    const p = probabilities.data as Float32Array;
    let agree = 0;
    for (let r = 0; r < 300; r++) {
      const sum = Array.from({ length: classes }, (_, c) => p[r * classes + c]!).reduce((a, b) => a + b, 0);
      expect(sum).toBeCloseTo(1, 5);
      if (argmax(p, r * classes, classes) === rows.labels[1200 + r]) agree += 1;
    }
    expect(agree / 300).toBeGreaterThan(0.95);
    await model.dispose();
  }, 60_000);

  it('BAD INPUT: a label outside the classes is PANOPTES_MODEL_RUN naming it, and the thread keeps training', async () => {
    const pool = clusters(60, 8, 3, 3);
    pool.labels[7] = 5;
    await expect(trainer.train({ ...pool, featureCount: 8, classes: 3, epochs: 1 })).rejects.toMatchObject({ code: 'PANOPTES_MODEL_RUN', message: expect.stringContaining('label 5 of row 7') });
    const again = clusters(60, 8, 3, 3);
    expect((await trainer.train({ ...again, featureCount: 8, classes: 3, epochs: 1 })).classes).toBe(3);
  }, 60_000);
  it('BAD INPUT: a cache too large for the WebAssembly heap fails its job, and the next job trains on a fresh thread', async (context) => {
    // The native bindings, where they load, have no such heap.
    if (head?.backend !== 'wasm') context.skip();
    // One row of a 2048×64×64 layer: a 7×7 conv's patches alone take 1.6 GB, its step about 10.
    const shape = { channels: 2048, height: 64, width: 64 };
    const hidden = new Float32Array(shape.channels * shape.height * shape.width).fill(0.5);
    const huge = trainer.trainCache({ variant: { family: 'Conv', kernel: 7, stride: 1 }, shape, hidden, targets: new Float32Array([1, 0]), classes: 2, epochs: 1, minSteps: 1 });
    await expect(huge).rejects.toMatchObject({ code: 'PANOPTES_MODEL_RUN', message: expect.stringMatching(/^training failed: (memory access out of bounds|Aborted)/) });
    const again = clusters(60, 8, 3, 3);
    expect((await trainer.train({ ...again, featureCount: 8, classes: 3, epochs: 1 })).classes).toBe(3);
  }, 120_000);
});
