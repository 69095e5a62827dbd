import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOnnxRuntime, framePriorFile, loadModelRunner, readFramePrior, writeFramePrior, type FramePrior } from '../../analyzers/index.js';
import { loadModelZoo, projectRoot, silentLogger } from '../../core/index.js';

const dir = mkdtempSync(join(tmpdir(), 'panoptes-frame-prior-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const prior: FramePrior = {
  model: 'centernet',
  inputSize: 512,
  tensor: 'layer:0',
  grid: 64,
  pairs: 40,
  source: 'test',
  weights: Float32Array.from([0.5, -0.25, 1, 2]),
  bias: Float32Array.from([0.1, -0.1]),
  threshold: 0.85,
  expectedHitRate: 0.4,
  expectedAccuracy: 0.99,
};

describe("a frame cache's prior (the selector shipped beside the model)", () => {
  it('is written and read back whole; a selector that could not vouch keeps its threshold of ∞', async () => {
    const file = join(dir, 'prior.json');
    await writeFramePrior(file, prior);
    expect(await readFramePrior(file)).toEqual(prior);
    await writeFramePrior(file, { ...prior, threshold: Infinity });
    expect((await readFramePrior(file))!.threshold).toBe(Infinity);
  });

  it('lives beside the model file; a model without one has none', async () => {
    expect(framePriorFile('/m/centernet.onnx')).toBe('/m/centernet.frame-cache-prior.json');
    expect(await readFramePrior(join(dir, 'absent.json'))).toBeUndefined();
  });

  it('BAD INPUT: a malformed or hostile prior is an error that names the file and what is wrong', async () => {
    const file = join(dir, 'bad.json');
    const written = async (change: Record<string, unknown>): Promise<unknown> => {
      await writeFramePrior(file, prior);
      writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), ...change }));
      return readFramePrior(file).catch((err: unknown) => err);
    };
    writeFileSync(file, '{ not json');
    await expect(readFramePrior(file)).rejects.toThrow(`${file}: not JSON`);
    writeFileSync(file, 'null');
    await expect(readFramePrior(file)).rejects.toThrow(`${file}: not a JSON object`);
    expect(await written({ version: 2 })).toMatchObject({ code: 'PANOPTES_MODEL_LOAD', message: expect.stringContaining('version 2') });
    expect(await written({ weights: [1, 2, 3] })).toMatchObject({ message: expect.stringContaining('weights must be [features, 2]') });
    expect(await written({ bias: [1, 'x'] })).toMatchObject({ message: expect.stringContaining('bias must be 2 finite float32 numbers') });
    // Finite in JSON, infinite as float32: the selector would answer NaN.
    expect(await written({ weights: [1e39, 0, 0, 0] })).toMatchObject({ message: expect.stringContaining('weights must be some finite float32 numbers') });
    // A threshold of 0 would make every lookup a hit.
    expect(await written({ threshold: 0 })).toMatchObject({ message: expect.stringContaining('threshold must be a number from 0.5 to 1, or null') });
    expect(await written({ expectedAccuracy: 3 })).toMatchObject({ message: expect.stringContaining('expectedAccuracy must be a number from 0 to 1') });
    expect(await written({ grid: -1 })).toMatchObject({ message: expect.stringContaining('grid must be a positive integer') });
  });

  it('BAD INPUT: a detector beside a malformed prior fails to load, naming the file', async () => {
    const model = join(dir, 'centernet.onnx');
    symlinkSync(join(projectRoot(), 'models/centernet.onnx'), model);
    writeFileSync(framePriorFile(model), '[]');
    const runtime = createOnnxRuntime({ logger: silentLogger(), workers: 1, intraOpThreads: 1 });
    try {
      await expect(loadModelRunner({ ...loadModelZoo().centernet!, file: model }, runtime)).rejects.toMatchObject({
        code: 'PANOPTES_MODEL_LOAD',
        message: `${framePriorFile(model)}: not a JSON object; make it again with npm run frame-cache-prior`,
      });
    } finally {
      await runtime.close();
    }
  });

  it("CenterNet's shipped prior reads the default layer and grid at 512 px, and vouches for its hits", async () => {
    const shipped = (await readFramePrior(framePriorFile(join(projectRoot(), 'models/centernet.onnx'))))!;
    expect(shipped).toMatchObject({ model: 'centernet', inputSize: 512, grid: 64, tensor: expect.stringContaining('expanded_conv_2/add') });
    expect(shipped.threshold).toBeLessThan(1);
    expect(shipped.expectedAccuracy).toBeGreaterThanOrEqual(0.97);
  });
});
