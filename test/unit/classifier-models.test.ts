import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, cropImage, decodeJpeg, loadFeatureExtractor, loadModelRunner } from '../../analyzers/index.js';
import { loadModelZoo, projectRoot, silentLogger } from '../../core/index.js';

describe('EfficientNet-Lite ImageNet classifiers (models/efficientnet-lite{0,2}.onnx)', () => {
  const runtime = createOnnxRuntime({ logger: silentLogger() });
  const zoo = loadModelZoo();
  afterAll(() => runtime.close());
  const frame = decodeJpeg(readFileSync(join(projectRoot(), 'test/fixtures/images/road-two-cars.jpg')));
  // The whole car on the left of the frame, seen from above.
  const car = async () => cropImage(await frame, { x1: 100, y1: 0, x2: 270, y2: 260 });

  const CARS = ['minivan', 'sports car', 'beach wagon', 'cab', 'convertible', 'limousine', 'racer', 'pickup', 'jeep', 'minibus', 'police van'];

  it.each(['efficientnet-lite2', 'efficientnet-lite0'])("%s calls a car's crop a kind of car: one `class` attribute per crop, with its probability", async (name) => {
    const runner = await loadModelRunner(zoo[name]!, runtime);
    const outputs = await runner.run([await car(), await frame], [{}, {}]);
    await runner.dispose();
    expect(outputs).toHaveLength(2);
    const [first] = outputs;
    expect(first).toMatchObject({ kind: 'attributes', attributes: [{ name: 'class' }] });
    const { value, score } = first?.kind === 'attributes' ? first.attributes[0]! : { value: '', score: NaN };
    expect(CARS).toContain(value);
    expect(score).toBeGreaterThan(0.1);
    expect(score).toBeLessThanOrEqual(1);
  }, 60_000);

  it('gives a template the pooled features at any input size, one row of 1280 per crop', async () => {
    const extractor = await loadFeatureExtractor({ ...zoo['efficientnet-lite0']!, inputSize: 128 }, runtime);
    const features = await extractor.features([await car(), await frame, await car()]);
    await extractor.dispose();
    expect(extractor.featureCount).toBe(1280);
    expect(features).toHaveLength(3 * 1280);
    // The same crop twice gives the same row; ReLU6 bounds the pooled values.
    expect(features.slice(0, 1280)).toEqual(features.slice(2 * 1280));
    expect(Math.max(...features)).toBeLessThanOrEqual(6);
  }, 60_000);

  it('BAD CONFIG: a classifier without `labelsFile` is PANOPTES_MODEL_LOAD naming the key', async () => {
    const { labelsFile: _, ...spec } = zoo['efficientnet-lite0']!;
    await expect(loadModelRunner(spec, runtime)).rejects.toMatchObject({ code: 'PANOPTES_MODEL_LOAD', message: expect.stringContaining('`labelsFile`') });
  });
});
